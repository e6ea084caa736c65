"""The threads of the chat page: the caller's sessions, one thread's history from its session,
re-attaching to its running reply (WatchReply) and stopping it (Interrupt)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hookmesh.client import AgentClient, AgentClientError, SessionInfo
from hookmesh.errors import SchemaError
from hookmesh.schema import ToolCall, is_hint, is_system, tool_results
from hookmesh.schema.agui import messages_to_agui
from hookmesh.services.agui._config import AguiGatewayConfig
from hookmesh.services.agui._events import RunEvents, confirmation_interrupt, front_end_call
from hookmesh.services.agui._input import THREAD_ID
from hookmesh.services.agui._relay import messages_snapshot, relay
from hookmesh.services.agui._request import HttpError, bearer_token, refusal
from hookmesh.services.agui._sse import event_stream

_CALL_TIMEOUT = 30.0
"""Seconds a lookup, a listing or an interrupt may take."""
_PAGE_SIZE = 50


def _utc(when: datetime) -> str:
    """ISO 8601 with the zone (the client's times are UTC, without one)."""
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()


def _history(session: SessionInfo) -> list[dict[str, Any]]:
    """The session's conversation as AG-UI messages (hints and system messages are not the
    conversation; a message AG-UI cannot hold, such as media in an assistant message, is
    left out rather than failing the whole history). A tool message whose call failed, was
    denied or interrupted says so in ``metadata.hookmesh.state``, as TOOL_CALL_RESULT does."""
    out: list[dict[str, Any]] = []
    for msg in session.context:
        if is_hint(msg) or is_system(msg):
            continue
        try:
            encoded = messages_to_agui([msg])
        except SchemaError:
            continue
        states = {r.call_id: r.state for r in tool_results(msg)}
        for item in encoded:
            state = states.get(item.get("toolCallId", ""), "success")
            if item["role"] == "tool" and state != "success":  # as TOOL_CALL_RESULT says it
                item["metadata"] = {"hookmesh": {"state": state}}
            for call in item.get("toolCalls") or ():  # as TOOL_CALL_START names it
                function = call["function"]
                tool = ToolCall(
                    id=call["id"], name=function["name"], arguments=function["arguments"]
                )
                function["name"], function["arguments"], _ = front_end_call(tool)
        out.extend(encoded)
    return out


def thread_json(session: SessionInfo) -> dict[str, Any]:
    """What ``GET /agui/threads/{threadId}`` answers: the thread's status, its history, and
    what a paused reply waits for (the open interrupts, or the front-end calls: their ids,
    and each as the tool to run with who asks)."""
    interrupts = []
    pending: list[str] = []
    calls: list[dict[str, Any]] = []
    if session.status == "awaiting_confirmation":
        interrupts = [
            confirmation_interrupt(c).model_dump(mode="json", by_alias=True, exclude_none=True)
            for c in session.pending_calls
        ]
    elif session.status == "awaiting_external_execution":
        pending = [c.id for c in session.pending_calls]
        calls = [_pending_call(c) for c in session.pending_calls]
    return {
        "threadId": session.session_id,
        "status": session.status,
        "replyId": session.reply_id,
        "lastSeq": session.last_seq,
        "updateTime": _utc(session.update_time),
        "messages": _history(session),
        "interrupts": interrupts,
        "pendingToolCallIds": pending,
        "pendingToolCalls": calls,
    }


def _pending_call(call: ToolCall) -> dict[str, Any]:
    """A front-end call the reply waits on, as TOOL_CALL_START gave it: ``{toolCallId,
    toolName, arguments}``, and ``askedBy`` for a sub-agent's call passed up."""
    tool, arguments, path = front_end_call(call)
    out: dict[str, Any] = {"toolCallId": call.id, "toolName": tool, "arguments": arguments}
    if path:
        out["askedBy"] = path
    return out


def _thread_id(request: Request) -> str:
    thread_id = str(request.path_params["thread_id"])
    if not THREAD_ID.fullmatch(thread_id):
        raise HttpError(
            400, "INVALID_SCHEMA", "threadId: use 1-128 characters of A-Z a-z 0-9 . _ : -"
        )
    return thread_id


def _failed(exc: AgentClientError, agent: str) -> HttpError:
    if exc.code == grpc.StatusCode.NOT_FOUND:
        return HttpError(404, exc.reason or "NOT_FOUND", exc.message)
    return refusal(exc, agent) or HttpError(502, exc.reason or exc.code.name, exc.message)


def thread_routes(config: AguiGatewayConfig, client: AgentClient) -> list[Route]:
    """The routes of docs/services/agui.md's "Threads": list, history, re-attach, stop."""

    def answering(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except HttpError as exc:
                return exc.response()
            except AgentClientError as exc:
                return _failed(exc, config.agent).response()

        return endpoint

    async def listing(request: Request) -> Response:
        page, next_token = await client.list_sessions(
            page_size=_PAGE_SIZE,
            page_token=request.query_params.get("pageToken", ""),
            timeout=_CALL_TIMEOUT,
            token=bearer_token(request),
        )
        threads = [
            {"threadId": s.session_id, "status": s.status, "updateTime": _utc(s.update_time)}
            for s in page
        ]
        return JSONResponse({"threads": threads, "nextPageToken": next_token})

    async def history(request: Request) -> Response:
        session = await client.get_session(
            _thread_id(request), timeout=_CALL_TIMEOUT, token=bearer_token(request)
        )
        return JSONResponse(thread_json(session))

    async def follow(request: Request) -> Response:
        thread_id, token = _thread_id(request), bearer_token(request)
        after = request.query_params.get("afterSeq", "0")
        if not after.isdigit():
            raise HttpError(
                400, "INVALID_SCHEMA", "afterSeq: a sequence number (0: from the start)"
            )
        session = await client.get_session(thread_id, timeout=_CALL_TIMEOUT, token=token)
        if not session.reply_id:
            raise HttpError(404, "REPLY_NOT_FOUND", f"thread {thread_id} has no reply yet")
        # NOTE(agui): the stream answers at once; what WatchReply refuses later (a reply gone
        # from the journal) ends the run with RUN_ERROR, as any failed run does.
        stream: Any = client.watch(
            thread_id,
            reply_id=session.reply_id,
            after_seq=int(after),
            timeout=config.run_timeout,
            token=token,
        )
        events = RunEvents(thread_id, request.query_params.get("runId") or session.reply_id)
        # The history up to now first, so the stream is self-contained (its results answer
        # calls the history made), as a resumed run's is.
        snapshot = messages_snapshot(_history(session))
        return event_stream(relay(events, {}, snapshot, None, stream), config.keepalive_seconds)

    async def stop(request: Request) -> Response:
        interrupted = await client.interrupt(
            _thread_id(request), timeout=_CALL_TIMEOUT, token=bearer_token(request)
        )
        return JSONResponse({"interrupted": interrupted})

    return [
        Route("/agui/threads", answering(listing), methods=["GET"]),
        Route("/agui/threads/{thread_id}", answering(history), methods=["GET"]),
        Route("/agui/threads/{thread_id}/reply", answering(follow), methods=["GET"]),
        Route("/agui/threads/{thread_id}/interrupt", answering(stop), methods=["POST"]),
    ]
