"""AgentServicer: sessions of one configured agent, served over gRPC."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import grpc

from hookmesh.agent import Agent, AgentState, Confirmation, ExternalResult, Resume, Tool, new_id
from hookmesh.agent.models import TOOL_CHOICE_MODES, ChatModel
from hookmesh.errors import FieldViolation, HookmeshError, RequestError, SchemaError, to_grpc_status
from hookmesh.middleware import Middleware
from hookmesh.schema import (
    AgentEvent,
    block_from_proto,
    check_messages,
    event_to_proto,
    message_to_proto,
    messages_from_proto,
    tool_result_state_from_proto,
)
from hookmesh.services.agent._config import AgentServiceConfig
from hookmesh.services.agent._store import SessionStore, StoredSession
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc
from hookmesh.v1 import message_pb2 as _message_pb2

log = logging.getLogger("hookmesh.agent_service")

_SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_MAX_PAGE = 1000
_DEFAULT_PAGE = 50
_STATUS = {
    None: _agent_pb2.SESSION_STATUS_IDLE,
    "confirmation": _agent_pb2.SESSION_STATUS_AWAITING_CONFIRMATION,
    "external": _agent_pb2.SESSION_STATUS_AWAITING_EXTERNAL_EXECUTION,
}


def _busy(session_id: str) -> RequestError:
    return RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "SESSION_BUSY",
        f"session {session_id} is already replying; wait for it or call Interrupt",
        metadata={"sessionId": session_id},
    )


def _not_found(session_id: str) -> RequestError:
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
        f"there is no session {session_id}",
        metadata={"sessionId": session_id},
    )


class AgentServicer(_agent_grpc.AgentServiceServicer):
    """Runs replies of the configured agent, one at a time per session, persisting sessions.

    Args:
        config: The service configuration.
        store: Where sessions live.
        models: Chat models by configured name.
        tools: The agent's tools.
        middlewares: Middleware instances (local or remote), outermost first.
    """

    def __init__(
        self,
        config: AgentServiceConfig,
        store: SessionStore,
        models: dict[str, ChatModel],
        tools: Sequence[Tool],
        middlewares: Sequence[Middleware],
    ) -> None:
        self.config = config
        self.store = store
        self.models = models
        self.tools = list(tools)
        self.middlewares = list(middlewares)
        self._running: dict[str, Agent | None] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    # --- helpers ---------------------------------------------------------------------------

    def _agent(self, session_id: str, state: AgentState, model: str) -> Agent:
        settings = self.config.agent
        return Agent(
            self.models[model],
            name=settings.name,
            system_prompt=settings.system_prompt,
            tools=self.tools,
            middlewares=self.middlewares,
            kind=settings.kind,
            max_iters=settings.max_iters,
            state=state,
            session_id=session_id,
        )

    def _check_size(self, request: Any, field: str) -> None:
        size = request.ByteSize()
        if size > self.config.max_request_bytes:
            raise SchemaError.single(
                field,
                f"the request is {size} bytes; the limit is {self.config.max_request_bytes}",
                reason="REQUEST_TOO_LARGE",
            )

    def _options(self, options: _agent_pb2.ReplyOptions) -> tuple[str, str, int | None]:
        violations: list[FieldViolation] = []
        model = self.config.agent.model
        if options.model and options.model != model:
            if not self.config.agent.allow_model_override:
                violations.append(
                    FieldViolation("options.model", "this server does not allow model overrides")
                )
            elif options.model not in self.models:
                names = ", ".join(sorted(self.models))
                violations.append(
                    FieldViolation("options.model", f"unknown model; configured: {names}")
                )
            else:
                model = options.model
        choice = options.tool_choice or "auto"
        if choice not in TOOL_CHOICE_MODES and not any(t.name == choice for t in self._all_tools()):
            violations.append(
                FieldViolation(
                    "options.tool_choice", "use auto, none, required or the name of a tool"
                )
            )
        if options.max_iters < 0 or options.max_iters > 1000:
            violations.append(
                FieldViolation("options.max_iters", "must be between 0 (default) and 1000")
            )
        if violations:
            raise SchemaError(violations, reason="INVALID_OPTIONS")
        return model, choice, options.max_iters or None

    def _all_tools(self) -> list[Tool]:
        out = list(self.tools)
        for mw in self.middlewares:
            out.extend(mw.list_tools())
        return out

    def _claim(self, session_id: str) -> None:
        if session_id in self._running:
            raise _busy(session_id)
        self._running[session_id] = None
        self._idle.clear()

    def _release(self, session_id: str) -> None:
        self._running.pop(session_id, None)
        if not self._running:
            self._idle.set()

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout` s) until every reply has ended and been persisted."""
        async with asyncio.timeout(timeout):
            await self._idle.wait()

    async def _stream(
        self,
        session_id: str,
        agent: Agent,
        events: AsyncIterator[AgentEvent],
        wrap: Callable[..., Any],
    ) -> AsyncIterator[Any]:
        """Stream a reply's events, then persist the session, whatever happens."""
        self._running[session_id] = agent
        try:
            async for event in events:
                yield wrap(event=event_to_proto(event))
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
            await asyncio.shield(self.store.put(session_id, agent.name, agent.state))

    # --- RPCs ------------------------------------------------------------------------------

    async def Reply(
        self, request: _agent_pb2.ReplyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_agent_pb2.ReplyResponse]:
        session_id = request.session_id
        claimed = False
        try:
            self._check_size(request, "messages")
            if session_id and not _SESSION_ID.match(session_id):
                raise SchemaError.single(
                    "session_id", "use 1-128 characters of A-Z a-z 0-9 . _ : -"
                )
            if not request.messages:
                raise SchemaError.single("messages", "send at least one message")
            if len(request.messages) > self.config.max_messages:
                raise SchemaError.single(
                    "messages",
                    f"{len(request.messages)} messages; the limit is {self.config.max_messages}",
                )
            messages = messages_from_proto(request.messages, "messages")
            check_messages(messages, "messages")
            model, choice, max_iters = self._options(request.options)
            if not session_id:
                session_id = new_id()
            self._claim(session_id)
            claimed = True
            stored = await self.store.get(session_id)
            if stored is None:
                await self.store.put(session_id, self.config.agent.name, AgentState())
            state = stored.state if stored is not None else AgentState()
            if state.pending is not None:
                raise RequestError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "REPLY_PAUSED",
                    f"session {session_id} has a paused reply: call Resume first",
                    metadata={"sessionId": session_id},
                )
            agent = self._agent(session_id, state, model)
            events = agent.reply(messages, tool_choice=choice, max_iters=max_iters)
        except HookmeshError as exc:
            if claimed:
                self._release(session_id)
            await context.abort_with_status(to_grpc_status(exc))
            return
        try:
            async for response in self._stream(session_id, agent, events, _agent_pb2.ReplyResponse):
                yield response
        finally:
            self._release(session_id)

    async def Resume(
        self, request: _agent_pb2.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_agent_pb2.ResumeResponse]:
        session_id = request.session_id
        claimed = False
        try:
            self._check_size(request, "external_results")
            stored = await self.store.get(session_id) if session_id else None
            if stored is None:
                raise _not_found(session_id)
            self._claim(session_id)
            claimed = True
            if stored.state.pending is None:
                raise RequestError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "NO_PAUSED_REPLY",
                    f"session {session_id} has no paused reply to resume",
                    metadata={"sessionId": session_id},
                )
            resume = _resume(request)
            agent = self._agent(session_id, stored.state, self.config.agent.model)
            events = agent.resume(resume)
        except HookmeshError as exc:
            if claimed:
                self._release(session_id)
            await context.abort_with_status(to_grpc_status(exc))
            return
        try:
            async for response in self._stream(
                session_id, agent, events, _agent_pb2.ResumeResponse
            ):
                yield response
        finally:
            self._release(session_id)

    async def Interrupt(
        self, request: _agent_pb2.InterruptRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.InterruptResponse:
        agent = self._running.get(request.session_id)
        if agent is not None:
            return _agent_pb2.InterruptResponse(interrupted=agent.interrupt())
        if (
            request.session_id not in self._running
            and await self.store.get(request.session_id) is None
        ):
            await context.abort_with_status(to_grpc_status(_not_found(request.session_id)))
        return _agent_pb2.InterruptResponse(interrupted=False)

    def _session(self, stored: StoredSession, with_context: bool) -> _agent_pb2.Session:
        pending = stored.state.pending
        status = _STATUS[pending.awaiting if pending else None]
        if stored.session_id in self._running:
            status = _agent_pb2.SESSION_STATUS_RUNNING
        session = _agent_pb2.Session(
            session_id=stored.session_id,
            agent_name=stored.agent_name,
            status=status,
            context=[message_to_proto(m) for m in stored.state.context] if with_context else [],
        )
        if pending is not None:
            calls = (
                pending.confirm_calls
                if pending.awaiting == "confirmation"
                else pending.external_calls
            )
            session.pending_calls.extend(
                _message_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls
            )
        session.create_time.FromDatetime(stored.create_time)
        session.update_time.FromDatetime(stored.update_time)
        return session

    async def GetSession(
        self, request: _agent_pb2.GetSessionRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.GetSessionResponse:
        session_id = request.session_id
        stored = await self.store.get(session_id) if session_id else None
        live = self._running.get(session_id)
        if live is not None:
            # A running reply is fresher than the store (which is written when it ends).
            now = datetime.now(UTC)
            stored = StoredSession(
                session_id,
                live.name,
                live.state,
                stored.create_time if stored else now,
                now,
            )
        if stored is None:
            await context.abort_with_status(to_grpc_status(_not_found(session_id)))
        assert stored is not None
        return _agent_pb2.GetSessionResponse(session=self._session(stored, with_context=True))

    async def ListSessions(
        self, request: _agent_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.ListSessionsResponse:
        try:
            if request.page_size < 0 or request.page_size > _MAX_PAGE:
                raise SchemaError.single(
                    "page_size", f"must be between 0 (default {_DEFAULT_PAGE}) and {_MAX_PAGE}"
                )
            after = _decode_token(request.page_token) if request.page_token else None
        except HookmeshError as exc:
            await context.abort_with_status(to_grpc_status(exc))
        size = request.page_size or _DEFAULT_PAGE
        page = await self.store.list(size + 1, after)
        more = len(page) > size
        page = page[:size]
        token = _encode_token(page[-1]) if more and page else ""
        return _agent_pb2.ListSessionsResponse(
            sessions=[self._session(s, with_context=False) for s in page], next_page_token=token
        )

    async def DeleteSession(
        self, request: _agent_pb2.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.DeleteSessionResponse:
        if request.session_id in self._running:
            await context.abort_with_status(to_grpc_status(_busy(request.session_id)))
        if not await self.store.delete(request.session_id):
            await context.abort_with_status(to_grpc_status(_not_found(request.session_id)))
        return _agent_pb2.DeleteSessionResponse()


def _resume(request: _agent_pb2.ResumeRequest) -> Resume:
    results = []
    for i, r in enumerate(request.external_results):
        output = [
            block_from_proto(b, f"external_results[{i}].output[{j}]")
            for j, b in enumerate(r.output)
        ]
        bad = [b for b in output if b.type not in ("text", "image", "audio", "video", "document")]
        if bad:
            raise SchemaError.single(
                f"external_results[{i}].output", "only text and media blocks are allowed"
            )
        state = tool_result_state_from_proto(r.state, f"external_results[{i}].state")
        results.append(ExternalResult(call_id=r.call_id, output=output, state=state))  # type: ignore[arg-type]
    confirmations = [
        Confirmation(
            call_id=c.call_id,
            confirmed=c.confirmed,
            reason=c.reason,
            arguments=c.arguments if c.HasField("arguments") else None,
        )
        for c in request.confirmations
    ]
    return Resume(confirmations=confirmations, external_results=results)


def _encode_token(session: StoredSession) -> str:
    raw = f"{session.update_time.isoformat()}|{session.session_id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_token(token: str) -> tuple[str, str]:
    try:
        update_time, sep, session_id = (
            base64.urlsafe_b64decode(token.encode()).decode().partition("|")
        )
    except (ValueError, UnicodeDecodeError):
        sep = ""
    if not sep:
        raise SchemaError.single("page_token", "not a token from a previous ListSessions call")
    return update_time, session_id
