"""AgentServicer: sessions of one configured agent, served over gRPC."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import grpc

from hookmesh.a2a import Limits
from hookmesh.agent import (
    Agent,
    AgentState,
    Confirmation,
    ExternalResult,
    Resume,
    Tool,
    new_id,
)
from hookmesh.client import limits_from_proto
from hookmesh.errors import FieldViolation, RequestError, SchemaError
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.propagated_limits import (
    PropagatedLimitMiddleware,
    RequestLimitMiddleware,
)
from hookmesh.models import TOOL_CHOICE_MODES, ChatModel
from hookmesh.schema import (
    block_from_proto,
    check_messages,
    message_to_proto,
    messages_from_proto,
    tool_result_state_from_proto,
)
from hookmesh.server import ANONYMOUS, current_user
from hookmesh.services.agent._chain import MiddlewareChain
from hookmesh.services.agent._claims import Key, SessionClaims
from hookmesh.services.agent._client_tools import client_tools
from hookmesh.services.agent._config import AgentServiceConfig
from hookmesh.services.agent._desk import ReplyDesk
from hookmesh.services.agent._flight import Durability, Flight
from hookmesh.services.agent._output_schema import configured_output, request_output
from hookmesh.services.agent._store import (
    SessionStore,
    SessionSummary,
    StoredSession,
    pending_from_json,
    summary_fields,
)
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc
from hookmesh.v1 import message_pb2 as _message_pb2

log = logging.getLogger("hookmesh.agent_service")

_SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_MAX_PAGE = 1000
_DEFAULT_PAGE = 50
_STATUS: dict[str | None, _agent_pb2.SessionStatus] = {
    None: _agent_pb2.SESSION_STATUS_IDLE,
    "running": _agent_pb2.SESSION_STATUS_RUNNING,
    "confirmation": _agent_pb2.SESSION_STATUS_AWAITING_CONFIRMATION,
    "external": _agent_pb2.SESSION_STATUS_AWAITING_EXTERNAL_EXECUTION,
}


_DURABILITY: dict[int, Durability] = {
    _agent_pb2.DURABILITY_STEP: "step",
    _agent_pb2.DURABILITY_EVENT: "event",
    _agent_pb2.DURABILITY_EXIT: "exit",
}
_DURABILITY_OF: dict[str, Durability] = {"step": "step", "event": "event", "exit": "exit"}


def _check_idle(session_id: str, state: AgentState) -> None:
    """Refuse a new reply on a session whose last one is paused or still in flight."""
    pending = state.pending
    if pending is None:
        return
    if pending.awaiting == "running":
        raise RequestError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "REPLY_RUNNING",
            f"session {session_id} has a reply in flight: follow it with WatchReply",
            metadata={"sessionId": session_id, "replyId": pending.reply_id},
        )
    raise RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "REPLY_PAUSED",
        f"session {session_id} has a paused reply: call Resume first",
        metadata={"sessionId": session_id},
    )


async def _close(stream: Any) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _not_found(session_id: str) -> RequestError:
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
        f"there is no session {session_id}",
        metadata={"sessionId": session_id},
    )


def _check_id(session_id: str, *, required: bool = True, field: str = "session_id") -> None:
    """Refuse a malformed session (or reply) id before it is echoed anywhere (errors stay
    small)."""
    if not session_id:
        if required:
            raise SchemaError.single(field, "name the session")
        return
    if not _SESSION_ID.fullmatch(session_id):
        raise SchemaError.single(field, "use 1-128 characters of A-Z a-z 0-9 . _ : -")


class AgentServicer(_agent_grpc.AgentServiceServicer):
    """Runs replies of the configured agent, one at a time per session (across replicas when
    the store is shared), persisting sessions.

    Args:
        config: The service configuration.
        store: Where sessions live.
        models: Chat models by configured name.
        tools: The agent's tools.
        chain: The middlewares (local or remote), outermost first; `swap` replaces them.
    """

    def __init__(
        self,
        config: AgentServiceConfig,
        store: SessionStore,
        models: dict[str, ChatModel],
        tools: Sequence[Tool],
        chain: MiddlewareChain,
    ) -> None:
        self.config = config
        self.store = store
        self.models = models
        self.tools = list(tools)
        self.chain = chain
        self.output = configured_output(config.agent.output_schema)
        """The configured output schema, compiled once (None: plain answers by default)."""
        self.claims = SessionClaims(store.leases)
        self.desk = ReplyDesk(
            store, self.claims, config.durability, lambda: self.chain, self._continued
        )

    async def swap(self, chain: MiddlewareChain) -> MiddlewareChain:
        """Make `chain` the one new replies take; the old one closes after its last reply.

        Returns:
            The old chain.
        """
        old, self.chain = self.chain, chain
        await old.retire()
        return old

    # --- helpers ---------------------------------------------------------------------------

    def _agent(
        self,
        owner: str,
        session_id: str,
        state: AgentState,
        model: str,
        client_tools: Sequence[Tool],
        chain: MiddlewareChain,
        limits: Limits | None = None,
        fresh: bool = False,
    ) -> Agent:
        settings = self.config.agent
        middlewares = chain.middlewares_for(session_id)
        if limits is not None:
            caller = RequestLimitMiddleware(limits, _prices(middlewares), fresh=fresh)
            middlewares = [caller, *middlewares]
        return Agent(
            self.models[model],
            name=settings.name,
            system_prompt=settings.system_prompt,
            tools=[*self.tools, *client_tools],
            middlewares=middlewares,
            kind=settings.kind,
            max_iters=settings.max_iters,
            state=state,
            session_id=session_id,
            user_id="" if owner == ANONYMOUS else owner,
            models=self.models,
            outcome_unknown=self.config.durability.outcome_unknown,
            output=self.output,
        )

    def _check_size(self, request: Any, field: str) -> None:
        size = request.ByteSize()
        if size > self.config.max_request_bytes:
            raise SchemaError.single(
                field,
                f"the request is {size} bytes; the limit is {self.config.max_request_bytes}",
                reason="REQUEST_TOO_LARGE",
            )

    def _options(
        self, options: _agent_pb2.ReplyOptions, client_tools: Sequence[Tool]
    ) -> tuple[str, str, int | None]:
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
        tools = [*self._all_tools(), *client_tools]
        if choice not in TOOL_CHOICE_MODES and not any(t.name == choice for t in tools):
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

    def _client_tools(self, pbs: Sequence[_agent_pb2.ClientTool]) -> list[Tool]:
        return client_tools(pbs, {t.name for t in self._all_tools()})

    def _all_tools(self) -> list[Tool]:
        out = list(self.tools)
        for mw in self.chain.middlewares:
            out.extend(mw.list_tools())
        return out

    def busy(self) -> set[Key]:
        """The (owner, session id) pairs replying now (retention never removes them)."""
        return self.claims.busy()

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout` s) until every reply has landed (see `ReplyDesk.drain`)."""
        await self.desk.drain(timeout)

    def _durability(self, options: _agent_pb2.ReplyOptions) -> Durability:
        return _DURABILITY.get(options.durability) or self.config.durability.mode

    def _continued(
        self,
        key: Key,
        state: AgentState,
        request: _agent_pb2.ReplyRequest,
        chain: MiddlewareChain,
    ) -> Agent:
        """The agent of a reply continued here, from its saved request."""
        model = request.options.model or self.config.agent.model
        if model not in self.models:
            model = self.config.agent.model
        tools = self._client_tools(request.client_tools)
        return self._agent(*key, state, model, tools, chain, _limits(request.options))

    async def _watch(
        self, flight: Flight, wrap: Callable[..., Any], after_seq: int = 0
    ) -> AsyncIterator[Any]:
        """Stream a flight's events; a caller going away stops an ``exit`` reply only."""
        try:
            async for seq, pb in self.desk.follow(flight, after_seq):
                yield wrap(event=pb, seq=seq)
        finally:
            if not flight.done.is_set() and flight.durability == "exit":
                flight.agent.interrupt()

    # --- RPCs ------------------------------------------------------------------------------

    async def Reply(
        self, request: _agent_pb2.ReplyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_agent_pb2.ReplyResponse]:
        session_id = request.session_id
        self._check_size(request, "messages")
        _check_id(session_id, required=False)
        _check_id(request.reply_id, required=False, field="reply_id")
        if not request.messages:
            raise SchemaError.single("messages", "send at least one message")
        if len(request.messages) > self.config.max_messages:
            raise SchemaError.single(
                "messages",
                f"{len(request.messages)} messages; the limit is {self.config.max_messages}",
            )
        messages = messages_from_proto(request.messages, "messages")
        check_messages(messages, "messages")
        client_tools = self._client_tools(request.client_tools)
        model, choice, max_iters = self._options(request.options, client_tools)
        limits = _limits(request.options)
        output = request_output(request, self.output)
        key = (current_user(), session_id or new_id())
        durability = self._durability(request.options)
        saved = _agent_pb2.ReplyRequest(options=request.options, client_tools=request.client_tools)
        chain = await self.desk.claim(key)
        try:
            stored = await self.store.get(*key)
            if stored is None:
                await self.store.put(
                    *key, self.config.agent.name, AgentState(), lease=self.claims.lease(key)
                )
            state = stored.state if stored is not None else AgentState()
            _check_idle(key[1], state)
            reply_id = request.reply_id or new_id()
            known = stored is not None and request.reply_id  # a new session has no replies
            if known and await self.store.reply(*key, reply_id) is not None:
                raise RequestError(
                    grpc.StatusCode.ALREADY_EXISTS,
                    "REPLY_EXISTS",
                    f"session {key[1]} already has reply {reply_id}: follow it with WatchReply",
                    metadata={"sessionId": key[1], "replyId": reply_id},
                )
            agent = self._agent(*key, state, model, client_tools, chain, limits)
        except BaseException:
            await self.desk.release(key, chain)
            raise
        flight = self.desk.launch(
            key,
            chain,
            agent,
            reply_id,
            lambda f: agent.reply(
                messages,
                tool_choice=choice,
                max_iters=max_iters,
                checkpoint=f.checkpoint(),
                reply_id=reply_id,
                output=output,
            ),
            durability=durability,
            request=saved.SerializeToString(),
        )
        async for response in self._watch(flight, _agent_pb2.ReplyResponse):
            yield response

    async def Resume(
        self, request: _agent_pb2.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_agent_pb2.ResumeResponse]:
        session_id = request.session_id
        key = (current_user(), session_id)
        self._check_size(request, "external_results")
        _check_id(session_id)
        if await self.store.get(*key) is None:
            raise _not_found(session_id)
        resume = _resume(request)
        client_tools = self._client_tools(request.client_tools)
        # A caller's limits sent with the resume replace the paused reply's in full.
        sent = _limits_of(request.limits, "limits") if request.HasField("limits") else None

        chain = await self.desk.claim(key)
        try:
            # Read again under the claim: another replica may have written it meanwhile.
            stored = await self.store.get(*key)
            if stored is None:
                raise _not_found(session_id)
            pending = stored.state.pending
            if pending is None or pending.awaiting == "running":
                raise RequestError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "NO_PAUSED_REPLY",
                    f"session {session_id} has no paused reply to resume",
                    metadata={"sessionId": session_id},
                )
            record = await self.store.reply(*key, pending.reply_id)
            limits = sent
            if sent is None and record is not None:
                limits = _limits(_agent_pb2.ReplyRequest.FromString(record.request).options)
            agent = self._agent(
                *key,
                stored.state,
                self.config.agent.model,
                client_tools,
                chain,
                limits,
                fresh=sent is not None,
            )
            events = agent.resume(resume)  # checks the answers before the claim is kept
        except BaseException:
            await self.desk.release(key, chain)
            raise
        await _close(events)
        durability = _DURABILITY_OF.get(record.durability, "step") if record else "step"
        saved = _agent_pb2.ReplyRequest(client_tools=request.client_tools)
        if record is not None:
            saved = _agent_pb2.ReplyRequest.FromString(record.request)
            del saved.client_tools[:]
            saved.client_tools.extend(request.client_tools)
        if sent is not None:  # a replica continuing this reply keeps the caller's new limits
            saved.options.limits.CopyFrom(request.limits)
        flight = self.desk.launch(
            key,
            chain,
            agent,
            pending.reply_id,
            lambda f: agent.resume(resume, checkpoint=f.checkpoint()),
            durability=durability,
            request=saved.SerializeToString(),
            after_seq=record.last_seq if record is not None else 0,
        )
        async for response in self._watch(flight, _agent_pb2.ResumeResponse):
            yield response

    async def WatchReply(
        self, request: _agent_pb2.WatchReplyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_agent_pb2.WatchReplyResponse]:
        _check_id(request.session_id)
        key = (current_user(), request.session_id)
        async for seq, pb in self.desk.watch(key, request.reply_id, request.after_seq):
            yield _agent_pb2.WatchReplyResponse(event=pb, seq=seq)

    async def Interrupt(
        self, request: _agent_pb2.InterruptRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.InterruptResponse:
        key = (current_user(), request.session_id)
        _check_id(request.session_id)
        if await self.claims.interrupt(key):
            return _agent_pb2.InterruptResponse(interrupted=True)
        if key not in self.claims and await self.store.get(*key) is None:
            raise _not_found(request.session_id)
        return _agent_pb2.InterruptResponse(interrupted=False)

    def _session(
        self, summary: SessionSummary, context: list[Any] | None = None
    ) -> _agent_pb2.Session:
        status = _STATUS[summary.awaiting or None]
        if (summary.owner, summary.session_id) in self.claims:
            status = _agent_pb2.SESSION_STATUS_RUNNING
        session = _agent_pb2.Session(
            session_id=summary.session_id,
            agent_name=summary.agent_name,
            status=status,
            context=[message_to_proto(m) for m in context or ()],
            pending_calls=[
                _message_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments)
                for c in summary.pending_calls
            ],
        )
        session.create_time.FromDatetime(summary.create_time)
        session.update_time.FromDatetime(summary.update_time)
        return session

    async def GetSession(
        self, request: _agent_pb2.GetSessionRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.GetSessionResponse:
        session_id = request.session_id
        key = (current_user(), session_id)
        _check_id(session_id)
        stored = await self.store.get(*key)
        live = self.claims.agent(key)
        if live is not None:
            # A running reply is fresher than the store (which is written when it ends).
            awaiting, pending = summary_fields(live.state)
            now = datetime.now(UTC)
            stored = StoredSession(
                key[0],
                session_id,
                live.name,
                stored.create_time if stored else now,
                now,
                awaiting,
                pending_from_json(pending),
                live.state,
            )
        if stored is None:
            raise _not_found(session_id)
        session = self._session(stored, list(stored.state.context))
        flight = self.desk.flight(key)
        record = await self.store.reply(*key) if flight is None else None
        if flight is not None:
            session.reply_id, session.last_seq = flight.reply_id, flight.seq
        elif record is not None:
            session.reply_id, session.last_seq = record.reply_id, record.last_seq
        return _agent_pb2.GetSessionResponse(session=session)

    async def ListSessions(
        self, request: _agent_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.ListSessionsResponse:
        if request.page_size < 0 or request.page_size > _MAX_PAGE:
            raise SchemaError.single(
                "page_size", f"must be between 0 (default {_DEFAULT_PAGE}) and {_MAX_PAGE}"
            )
        after = _decode_token(request.page_token) if request.page_token else None
        size = request.page_size or _DEFAULT_PAGE
        page = await self.store.list(current_user(), size + 1, after)
        more = len(page) > size
        page = page[:size]
        token = _encode_token(page[-1]) if more and page else ""
        return _agent_pb2.ListSessionsResponse(
            sessions=[self._session(s) for s in page], next_page_token=token
        )

    async def DescribeAgent(
        self, request: _agent_pb2.DescribeAgentRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.DescribeAgentResponse:
        settings = self.config.agent
        tools = [_agent_tool(t, "") for t in self.tools]
        for mw in self.chain.middlewares:
            tools.extend(_agent_tool(t, mw.middleware_key()) for t in mw.list_tools())
        return _agent_pb2.DescribeAgentResponse(
            agent_name=settings.name,
            description=settings.description,
            tools=tools,
            middleware_keys=[mw.middleware_key() for mw in self.chain.middlewares],
        )

    async def DeleteSession(
        self, request: _agent_pb2.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> _agent_pb2.DeleteSessionResponse:
        key = (current_user(), request.session_id)
        _check_id(request.session_id)
        await self.claims.claim(key)
        try:
            deleted = await self.store.delete(*key)
        finally:
            await self.claims.release(key)
        if not deleted:
            raise _not_found(request.session_id)
        return _agent_pb2.DeleteSessionResponse()


def _agent_tool(tool: Tool, middleware_key: str) -> _agent_pb2.AgentTool:
    return _agent_pb2.AgentTool(
        name=tool.name,
        description=tool.description,
        middleware_key=middleware_key,
        read_only=tool.read_only,
        needs_confirmation=tool.needs_confirmation,
    )


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


def _encode_token(session: SessionSummary) -> str:
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


def _limits(options: _agent_pb2.ReplyOptions) -> Limits | None:
    """The limits a caller set on the reply, if any.

    Raises:
        SchemaError: A limit is negative or not a finite number (INVALID_OPTIONS).
    """
    if not options.HasField("limits"):
        return None
    return _limits_of(options.limits, "options.limits")


def _limits_of(pb: _agent_pb2.ReplyLimits, field: str) -> Limits:
    """The limits `pb` (the request's `field`) sets.

    Raises:
        SchemaError: A limit is negative or not a finite number (INVALID_OPTIONS).
    """
    limits, wrong = limits_from_proto(pb, field)
    if wrong:
        raise SchemaError(wrong, reason="INVALID_OPTIONS")
    return limits


def _prices(middlewares: Sequence[Middleware]) -> tuple[float, float]:
    """The model prices of the agent's own propagated limit, for the caller's limits."""
    for mw in middlewares:
        if isinstance(mw, PropagatedLimitMiddleware):
            return mw.prices
    return (0.0, 0.0)
