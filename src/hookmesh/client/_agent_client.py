"""Python clients of the AgentService: `AgentClient` (asyncio) and `SyncAgentClient`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import grpc
from google.protobuf import struct_pb2

from hookmesh._security import ClientTLS, channel_credentials, open_channel
from hookmesh.agent import Confirmation, ExternalResult, Output, Tool
from hookmesh.client._errors import AgentClientError
from hookmesh.client._output import output_schema_pb
from hookmesh.schema import (
    AgentEvent,
    AgenticMessage,
    FlatMessage,
    Message,
    TextBlock,
    ToolCall,
    block_to_proto,
    event_from_proto,
    make_user_text,
    message_from_proto,
    message_to_proto,
    tool_result_state_to_proto,
)
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc

if TYPE_CHECKING:
    from hookmesh.a2a import Limits

DEFAULT_TIMEOUT = 300.0
"""Seconds a reply (the whole stream) or any other call may take."""
MAX_RECEIVE_BYTES = 256 * 1024 * 1024
"""Largest message the clients accept: GetSession returns a session's whole context, which
grows past gRPC's default 4 MiB after a few large requests the service accepted."""
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]

SessionStatus = Literal["idle", "running", "awaiting_confirmation", "awaiting_external_execution"]
_STATUS: dict[int, SessionStatus] = {
    _agent_pb2.SESSION_STATUS_IDLE: "idle",
    _agent_pb2.SESSION_STATUS_RUNNING: "running",
    _agent_pb2.SESSION_STATUS_AWAITING_CONFIRMATION: "awaiting_confirmation",
    _agent_pb2.SESSION_STATUS_AWAITING_EXTERNAL_EXECUTION: "awaiting_external_execution",
}


@dataclass
class SessionInfo:
    """A session as the service reports it."""

    session_id: str
    agent_name: str
    status: SessionStatus
    context: list[Message]
    pending_calls: list[ToolCall]
    create_time: datetime
    update_time: datetime
    reply_id: str = ""
    """The reply running, paused or last run ('' before the first)."""
    last_seq: int = 0
    """The last sequence number saved of that reply (`watch` from here)."""


@dataclass
class AgentTool:
    """A tool the agent offers its model, as the service describes it."""

    name: str
    description: str
    middleware_key: str
    """The middleware contributing it; empty for the agent's own tools."""
    read_only: bool
    needs_confirmation: bool


@dataclass
class AgentInfo:
    """The agent as the service describes it (`AgentClient.describe`)."""

    agent_name: str
    description: str
    tools: list[AgentTool]
    middleware_keys: list[str]


def _session(pb: _agent_pb2.Session) -> SessionInfo:
    return SessionInfo(
        session_id=pb.session_id,
        agent_name=pb.agent_name,
        status=_STATUS.get(pb.status, "idle"),
        context=[message_from_proto(m, "session.context") for m in pb.context],
        pending_calls=[
            ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in pb.pending_calls
        ],
        create_time=pb.create_time.ToDatetime(),
        update_time=pb.update_time.ToDatetime(),
        reply_id=pb.reply_id,
        last_seq=pb.last_seq,
    )


def _client_tool(tool: Tool) -> _agent_pb2.ClientTool:
    parameters = struct_pb2.Struct()
    parameters.update(tool.parameters)
    return _agent_pb2.ClientTool(
        name=tool.name, description=tool.description, parameters=parameters
    )


Durability = Literal["", "step", "event", "exit"]
"""When the service saves a reply's progress; empty: its configured default."""
_DURABILITY_TO_PB = {
    "": _agent_pb2.DURABILITY_UNSPECIFIED,
    "step": _agent_pb2.DURABILITY_STEP,
    "event": _agent_pb2.DURABILITY_EVENT,
    "exit": _agent_pb2.DURABILITY_EXIT,
}
REATTACH_REASONS = frozenset({"", "STREAM_RESET", "REPLY_HANDED_OVER"})
"""The UNAVAILABLE failures after which a client re-attaches to its reply (no reason: the
connection or the replica went away). A store outage is reported instead: re-attaching could
only wait for the store."""
_BACKOFF = (0.05, 0.1, 0.2, 0.5, 1.0)
"""Seconds between re-attach attempts (the last one repeats until the deadline)."""
_TRIES_BEFORE_ANY_EVENT = 3
"""Re-attach attempts for a call that got no event yet: enough to find a reply that a dying
replica started, not so many that a server that is down keeps the caller waiting (it is told
at once, in a third of a second)."""


class Reattach:
    """Where a reply's stream stands, and what to do when it breaks: follow the reply
    (WatchReply), or send a Reply that never started again (its ids are the caller's, so a
    reply is never started twice).

    Args:
        session_id: The session (the caller's, or learnt from reply_start).
        reply_id: The reply, when the caller chose it.
        resend: Sends the Reply again (given the time left): set for a Reply whose ids the
            client chose.
    """

    __slots__ = ("reply_id", "resend", "seen", "seq", "session_id")

    def __init__(
        self,
        session_id: str,
        reply_id: str = "",
        resend: Callable[[float], Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.reply_id = reply_id
        self.resend = resend
        self.seq = 0
        self.seen = False

    def take(self, response: Any) -> AgentEvent | None:
        """The response's event, or None when it was seen before (a re-sent number)."""
        if response.seq and response.seq <= self.seq:
            return None
        self.seq = response.seq or self.seq
        self.seen = True
        event = event_from_proto(response.event)
        if not self.reply_id and event.type == "reply_start" and not event.source_path:
            self.reply_id = event.reply_id
            self.session_id = event.session_id or self.session_id
        elif not self.reply_id and event.reply_id and not event.source_path:
            self.reply_id = event.reply_id
        return event

    def after(
        self, error: AgentClientError, attempt: int = 0
    ) -> Literal["watch", "resend", "raise"]:
        """What to do after `error` (the `attempt`-th retry in a row): follow the reply, send
        it again, or give up."""
        if not (self.reply_id and self.session_id):
            return "raise"
        if not self.seen and attempt >= _TRIES_BEFORE_ANY_EVENT:
            return "raise"
        if error.code == grpc.StatusCode.UNAVAILABLE and error.reason in REATTACH_REASONS:
            return "watch"
        if error.code == grpc.StatusCode.CANCELLED and not error.reason:
            return "watch"  # the server went away mid-call (not this client: it would not be here)
        if self.resend is not None and not self.seq:
            if error.reason == "REPLY_NOT_FOUND":
                return "resend"  # the broken call never started the reply
            if error.reason == "REPLY_EXISTS":
                return "watch"  # the resent call found it started after all
        return "raise"

    def request(self) -> _agent_pb2.WatchReplyRequest:
        return _agent_pb2.WatchReplyRequest(
            session_id=self.session_id, reply_id=self.reply_id, after_seq=self.seq
        )


class ReplyStream(AsyncIterator[AgentEvent]):
    """A reply's events (an async iterator), and where they stand: the reply's id and the
    sequence number of the last event, so a caller that stops can `watch` from there later
    (another process included)."""

    __slots__ = ("_events", "_where")

    def __init__(self, events: AsyncGenerator[AgentEvent, None], where: Reattach) -> None:
        self._events = events
        self._where = where

    @property
    def reply_id(self) -> str:
        """The reply's id (empty before its first event when the service chose it)."""
        return self._where.reply_id

    @property
    def seq(self) -> int:
        """The last event's sequence number (0 before the first, or from a service that does
        not number events)."""
        return self._where.seq

    def __aiter__(self) -> ReplyStream:
        return self

    async def __anext__(self) -> AgentEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading (cancels the call)."""
        await self._events.aclose()


def _reply_request(
    messages: str | Message | Sequence[Message],
    session_id: str,
    max_iters: int,
    tool_choice: str,
    model: str,
    client_tools: Sequence[Tool],
    durability: Durability = "",
    output: Output | None = None,
) -> _agent_pb2.ReplyRequest:
    if isinstance(messages, str):
        batch = [make_user_text("flat", messages)]
    elif isinstance(messages, FlatMessage | AgenticMessage):
        batch = [messages]
    else:
        batch = list(messages)
    request = _agent_pb2.ReplyRequest(
        session_id=session_id,
        messages=[message_to_proto(m) for m in batch],
        options=_agent_pb2.ReplyOptions(
            max_iters=max_iters,
            tool_choice=tool_choice,
            model=model,
            durability=_DURABILITY_TO_PB[durability],
        ),
        client_tools=[_client_tool(t) for t in client_tools],
    )
    if output is not None:
        request.output_schema.CopyFrom(output_schema_pb(output))
    return request


def _set_limits(pb: _agent_pb2.ReplyLimits, limits: Limits | None) -> None:
    """Put `limits` in a request's `pb` (left unset for None or no limit set)."""
    if limits is not None and limits.any():
        # NOTE(imports): imported when used: `hookmesh.a2a` pulls in the A2A SDK.
        from hookmesh.client._limits import limits_to_proto

        pb.CopyFrom(limits_to_proto(limits))


def _resume_request(
    session_id: str,
    confirmations: Sequence[Confirmation],
    external_results: Sequence[ExternalResult],
    client_tools: Sequence[Tool],
) -> _agent_pb2.ResumeRequest:
    results = []
    for r in external_results:
        output = [TextBlock(text=r.output)] if isinstance(r.output, str) else r.output  # type: ignore[union-attr]
        results.append(
            _agent_pb2.ExternalToolResult(
                call_id=r.call_id,
                output=[block_to_proto(b) for b in output],
                state=tool_result_state_to_proto(r.state),
            )
        )
    return _agent_pb2.ResumeRequest(
        session_id=session_id,
        confirmations=[
            _agent_pb2.ToolConfirmation(
                call_id=c.call_id, confirmed=c.confirmed, reason=c.reason, arguments=c.arguments
            )
            for c in confirmations
        ],
        external_results=results,
        client_tools=[_client_tool(t) for t in client_tools],
    )


def _new_id() -> str:
    """A fresh session or reply id (the caller's: see `Reattach`)."""
    return os.urandom(16).hex()


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def text_of_events(events: Sequence[AgentEvent]) -> str:
    """The answer text of a reply's events (its own text deltas joined; nested runs' text
    is progress, not the answer)."""
    return "".join(e.delta for e in events if e.type == "text_block_delta" and not e.source_path)


class AgentClient:
    """Asyncio client of an AgentService.

    Use as ``async with AgentClient("127.0.0.1:7000") as client:``. Every call has a deadline
    (`timeout`, overridable per call). A reply's stream that breaks (the connection, the
    replica running it, a proxy's reset) is re-attached by itself (`WatchReply`) until that
    deadline, so the events come exactly once and in order. Leaving a reply's iteration
    early ends the call; the reply goes on on the server (call `interrupt` to stop it),
    unless its durability is ``exit``.

    Args:
        target: ``host:port`` of the service.
        timeout: Default deadline in seconds for each call (a reply's whole stream).
        tls: TLS settings; plaintext when None.
        token: Bearer token to send (a secret).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> None:
        self.timeout = timeout
        self._channel = open_channel(target, tls, _CHANNEL_OPTIONS)
        self._stub = _agent_grpc.AgentServiceStub(self._channel)
        self._metadata = _metadata(token)

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *unused_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel (cancelling calls in flight)."""
        await self._channel.close()

    def _streamed(
        self,
        start: Callable[[float], Any],
        where: Reattach,
        timeout: float | None,
        token: str | None,
    ) -> ReplyStream:
        """A reply's events from the call `start` makes at once (given its deadline),
        followed on after a break as `Reattach.after` says, until the deadline."""
        limit = timeout or self.timeout
        deadline = asyncio.get_running_loop().time() + limit
        return ReplyStream(self._events(start(limit), where, deadline, token), where)

    async def _events(
        self, call: Any, where: Reattach, deadline: float, token: str | None
    ) -> AsyncGenerator[AgentEvent, None]:
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            try:
                async for response in call:
                    event = where.take(response)
                    if event is not None:
                        attempt = 0
                        yield event
                return
            except grpc.aio.AioRpcError as exc:
                error = AgentClientError.from_rpc_error(exc)
            finally:
                call.cancel()
            step, left = where.after(error, attempt), deadline - loop.time()
            if step == "raise" or left <= 0:
                raise error
            attempt += 1
            if step == "resend" and where.resend is not None:
                call = where.resend(left)
                continue
            await asyncio.sleep(min(_BACKOFF[min(attempt - 1, len(_BACKOFF) - 1)], left))
            call = self._stub.WatchReply(
                where.request(),
                timeout=max(deadline - loop.time(), 0.001),
                metadata=self._call_metadata(token),
            )

    def reply(
        self,
        messages: str | Message | Sequence[Message],
        *,
        session_id: str = "",
        max_iters: int = 0,
        tool_choice: str = "",
        model: str = "",
        client_tools: Sequence[Tool] = (),
        timeout: float | None = None,
        token: str | None = None,
        durability: Durability = "",
        reply_id: str = "",
        output: Output | None = None,
        limits: Limits | None = None,
    ) -> ReplyStream:
        """Stream one reply's events. A str becomes one user message.

        Args:
            messages: The new input.
            session_id: The session; a new one when empty.
            max_iters: Most reasoning steps; 0 for the agent's setting.
            tool_choice: ``auto``, ``none``, ``required`` or a tool name; empty for auto.
            model: A configured model to use instead of the default.
            client_tools: Tools the caller runs itself: a call to one pauses the reply with
                require_external_execution (`resume` answers it).
            timeout: This call's deadline instead of the client's (re-attaching included).
            token: This call's bearer token instead of the client's (a secret).
            durability: ``step``, ``event`` or ``exit`` instead of the service's default.
            reply_id: The reply's id (a fresh one when empty), for a caller that names it
                before the reply begins.
            output: The structured answer to ask for (a pydantic model, a JSON Schema or an
                `OutputSpec`); reply_end's ``output.value`` is then its JSON value.
            limits: What the reply and its sub-agents may spend (a bounded caller's share:
                docs/multi-agent.md).

        Raises:
            AgentClientError: The service refused the request or the call failed (and could
                not be re-attached before the deadline).
            SchemaError: `output` is not a valid output schema.
        """
        request = _reply_request(
            messages,
            session_id or _new_id(),
            max_iters,
            tool_choice,
            model,
            client_tools,
            durability,
            output,
        )
        _set_limits(request.options.limits, limits)
        request.reply_id = reply_id or _new_id()
        metadata = self._call_metadata(token)

        def send(left: float) -> Any:
            return self._stub.Reply(request, timeout=left, metadata=metadata)

        return self._streamed(
            send, Reattach(request.session_id, request.reply_id, send), timeout, token
        )

    def watch(
        self,
        session_id: str,
        *,
        reply_id: str = "",
        after_seq: int = 0,
        timeout: float | None = None,
        token: str | None = None,
    ) -> ReplyStream:
        """Follow a reply (the session's latest when `reply_id` is empty) from after
        `after_seq`, on whichever replica runs it, until it ends; re-attached as `reply`."""
        request = _agent_pb2.WatchReplyRequest(
            session_id=session_id, reply_id=reply_id, after_seq=after_seq
        )
        metadata = self._call_metadata(token)
        return self._streamed(
            lambda t: self._stub.WatchReply(request, timeout=t, metadata=metadata),
            Reattach(session_id, reply_id),
            timeout,
            token,
        )

    async def text(self, messages: str | Message | Sequence[Message], **options: Any) -> str:
        """Run a reply and return its answer text."""
        return text_of_events([e async for e in self.reply(messages, **options)])

    def resume(
        self,
        session_id: str,
        *,
        confirmations: Sequence[Confirmation] = (),
        external_results: Sequence[ExternalResult] = (),
        client_tools: Sequence[Tool] = (),
        timeout: float | None = None,
        token: str | None = None,
        limits: Limits | None = None,
    ) -> ReplyStream:
        """Continue a paused reply, streaming its events (`client_tools`, `timeout` and
        `token` as in `reply`). `limits` replace the paused reply's limits in full (a
        bounded caller's share as it is now); None: it goes on with what it had left.

        Each confirmation approves a call (``confirmed=True``), edits it (``confirmed=True``
        with ``arguments``, JSON text valid for the tool) or rejects it (``confirmed=False``
        with a ``reason`` the model reads). Invalid edits raise `AgentClientError`
        INVALID_ARGUMENT (``INVALID_SCHEMA``) and leave the reply paused.
        """
        request = _resume_request(session_id, confirmations, external_results, client_tools)
        _set_limits(request.limits, limits)
        metadata = self._call_metadata(token)
        return self._streamed(
            lambda t: self._stub.Resume(request, timeout=t, metadata=metadata),
            Reattach(session_id, ""),
            timeout,
            token,
        )

    def _call_metadata(self, token: str | None) -> tuple[tuple[str, str], ...]:
        return self._metadata if token is None else _metadata(token)

    async def _unary(
        self, method: Any, request: Any, timeout: float | None, token: str | None = None
    ) -> Any:
        try:
            return await method(
                request, timeout=timeout or self.timeout, metadata=self._call_metadata(token)
            )
        except grpc.aio.AioRpcError as exc:
            raise AgentClientError.from_rpc_error(exc) from None

    async def interrupt(
        self, session_id: str, *, timeout: float | None = None, token: str | None = None
    ) -> bool:
        """Stop the session's running reply; False when none was running (`token` as in
        `reply`)."""
        response = await self._unary(
            self._stub.Interrupt,
            _agent_pb2.InterruptRequest(session_id=session_id),
            timeout,
            token,
        )
        return bool(response.interrupted)

    async def describe(
        self, *, timeout: float | None = None, token: str | None = None
    ) -> AgentInfo:
        """The agent's name, description, tools and middlewares (`token` as in `reply`)."""
        response = await self._unary(
            self._stub.DescribeAgent, _agent_pb2.DescribeAgentRequest(), timeout, token
        )
        return AgentInfo(
            agent_name=response.agent_name,
            description=response.description,
            tools=[
                AgentTool(
                    t.name, t.description, t.middleware_key, t.read_only, t.needs_confirmation
                )
                for t in response.tools
            ],
            middleware_keys=list(response.middleware_keys),
        )

    async def get_session(
        self, session_id: str, *, timeout: float | None = None, token: str | None = None
    ) -> SessionInfo:
        """The session with its context (`token` as in `reply`)."""
        response = await self._unary(
            self._stub.GetSession,
            _agent_pb2.GetSessionRequest(session_id=session_id),
            timeout,
            token,
        )
        return _session(response.session)

    async def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        token: str | None = None,
    ) -> tuple[list[SessionInfo], str]:
        """One page of the caller's sessions (without context) and the next page's token
        (`token` as in `reply`)."""
        request = _agent_pb2.ListSessionsRequest(page_size=page_size, page_token=page_token)
        response = await self._unary(self._stub.ListSessions, request, timeout, token)
        return [_session(s) for s in response.sessions], response.next_page_token

    async def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """Delete a session that is not replying."""
        await self._unary(
            self._stub.DeleteSession,
            _agent_pb2.DeleteSessionRequest(session_id=session_id),
            timeout,
        )


class SyncAgentClient:
    """Blocking client of an AgentService, for scripts and notebooks (same API as AgentClient)."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> None:
        self.timeout = timeout
        if tls is None:
            self._channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        else:
            creds, options = channel_credentials(tls)
            self._channel = grpc.secure_channel(
                target, creds, options=[*_CHANNEL_OPTIONS, *options]
            )
        self._stub = _agent_grpc.AgentServiceStub(self._channel)
        self._metadata = _metadata(token)

    def __enter__(self) -> SyncAgentClient:
        return self

    def __exit__(self, *unused_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def _events(
        self, start: Callable[[float], Any], where: Reattach, timeout: float | None
    ) -> Iterator[AgentEvent]:
        """As `AgentClient._streamed`: the call starts at once."""
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        return self._iterate(start(limit), where, deadline)

    def _iterate(self, call: Any, where: Reattach, deadline: float) -> Iterator[AgentEvent]:
        attempt = 0
        while True:
            try:
                for response in call:
                    event = where.take(response)
                    if event is not None:
                        attempt = 0
                        yield event
                return
            except grpc.RpcError as exc:
                error = AgentClientError.from_rpc_error(exc)
            finally:
                call.cancel()
            step, left = where.after(error, attempt), deadline - time.monotonic()
            if step == "raise" or left <= 0:
                raise error
            attempt += 1
            if step == "resend" and where.resend is not None:
                call = where.resend(left)
                continue
            time.sleep(min(_BACKOFF[min(attempt - 1, len(_BACKOFF) - 1)], left))
            call = self._stub.WatchReply(
                where.request(),
                timeout=max(deadline - time.monotonic(), 0.001),
                metadata=self._metadata,
            )

    def reply(
        self,
        messages: str | Message | Sequence[Message],
        *,
        session_id: str = "",
        max_iters: int = 0,
        tool_choice: str = "",
        model: str = "",
        client_tools: Sequence[Tool] = (),
        timeout: float | None = None,
        durability: Durability = "",
        output: Output | None = None,
        limits: Limits | None = None,
    ) -> Iterator[AgentEvent]:
        """Stream one reply's events (re-attached as `AgentClient.reply` is; `limits` as
        there)."""
        request = _reply_request(
            messages,
            session_id or _new_id(),
            max_iters,
            tool_choice,
            model,
            client_tools,
            durability,
            output,
        )
        _set_limits(request.options.limits, limits)
        request.reply_id = _new_id()

        def send(left: float) -> Any:
            return self._stub.Reply(request, timeout=left, metadata=self._metadata)

        return self._events(send, Reattach(request.session_id, request.reply_id, send), timeout)

    def watch(
        self,
        session_id: str,
        *,
        reply_id: str = "",
        after_seq: int = 0,
        timeout: float | None = None,
    ) -> Iterator[AgentEvent]:
        """Follow a reply, as `AgentClient.watch`."""
        request = _agent_pb2.WatchReplyRequest(
            session_id=session_id, reply_id=reply_id, after_seq=after_seq
        )
        return self._events(
            lambda t: self._stub.WatchReply(request, timeout=t, metadata=self._metadata),
            Reattach(session_id, reply_id),
            timeout,
        )

    def text(self, messages: str | Message | Sequence[Message], **options: Any) -> str:
        """Run a reply and return its answer text."""
        return text_of_events(list(self.reply(messages, **options)))

    def resume(
        self,
        session_id: str,
        *,
        confirmations: Sequence[Confirmation] = (),
        external_results: Sequence[ExternalResult] = (),
        client_tools: Sequence[Tool] = (),
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> Iterator[AgentEvent]:
        """Continue a paused reply, as `AgentClient.resume`: `limits` replace the paused
        reply's limits in full; None: it goes on with what it had left."""
        request = _resume_request(session_id, confirmations, external_results, client_tools)
        _set_limits(request.limits, limits)
        return self._events(
            lambda t: self._stub.Resume(request, timeout=t, metadata=self._metadata),
            Reattach(session_id),
            timeout,
        )

    def _unary(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise AgentClientError.from_rpc_error(exc) from None

    def interrupt(self, session_id: str, *, timeout: float | None = None) -> bool:
        """Stop the session's running reply."""
        return bool(
            self._unary(
                self._stub.Interrupt, _agent_pb2.InterruptRequest(session_id=session_id), timeout
            ).interrupted
        )

    def get_session(self, session_id: str, *, timeout: float | None = None) -> SessionInfo:
        """The session with its context."""
        return _session(
            self._unary(
                self._stub.GetSession, _agent_pb2.GetSessionRequest(session_id=session_id), timeout
            ).session
        )

    def list_sessions(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> tuple[list[SessionInfo], str]:
        """One page of sessions and the next page's token."""
        response = self._unary(
            self._stub.ListSessions,
            _agent_pb2.ListSessionsRequest(page_size=page_size, page_token=page_token),
            timeout,
        )
        return [_session(s) for s in response.sessions], response.next_page_token

    def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """Delete a session that is not replying."""
        self._unary(
            self._stub.DeleteSession,
            _agent_pb2.DeleteSessionRequest(session_id=session_id),
            timeout,
        )
