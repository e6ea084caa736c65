"""The sidecar host: serves any in-process middleware as a MiddlewareService."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
from opentelemetry import propagate, trace

from hookmesh.errors import RequestError, SchemaError, to_grpc_status
from hookmesh.middleware import ONION_HOOKS, Middleware
from hookmesh.models import ModelError
from hookmesh.remote import _codec as c
from hookmesh.remote._invocation import RemoteHookError, SidecarError
from hookmesh.remote._runners import _RUNNERS, ModelChoice
from hookmesh.remote._subscriptions import ITEMS, Routes, check_subscriptions
from hookmesh.remote._sync import Sync
from hookmesh.schema import (
    AgentEvent,
    Message,
    MessageKind,
    ReplyError,
    block_to_proto,
    event_to_proto,
    message_from_proto,
)
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

log = logging.getLogger("hookmesh.sidecar")
_tracer = trace.get_tracer("hookmesh.sidecar")


def _sdk_tracing() -> bool:
    """Whether an SDK tracer provider is installed (else spans would not be recorded)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


_HOOK_ORDER = (*ONION_HOOKS, "on_system_prompt", "after_agent")


class DownstreamError(Exception):
    """The agent's downstream failed; raised inside the hook, as it would be in process."""

    def __init__(self, error: ReplyError) -> None:
        super().__init__(error.message)
        self.error = error


class DownstreamModelError(ModelError):
    """The model failed downstream: a `ModelError` with its HTTP status, as in process, so a
    middleware's error filter (retry, fallback) treats it the same on both sides."""

    def __init__(self, error: ReplyError) -> None:
        status = error.metadata.get("httpStatus", "")
        metadata = {k: v for k, v in error.metadata.items() if k != "httpStatus"}
        super().__init__(
            error.message, status=int(status) if status.isdigit() else 0, metadata=metadata
        )
        self.error = error


def downstream_error(error: ReplyError) -> Exception:
    """The downstream's failure as the hook sees it (a model error stays a `ModelError`)."""
    if error.reason == ModelError.reason:
        return DownstreamModelError(error)
    return DownstreamError(error)


class _HostState:
    """What a hook sees of `agent.state` in the sidecar: the context it asked for and its own
    slice (an AgentState's shape without its validation cost on every invocation)."""

    __slots__ = ("context", "middle_context", "pending")

    def __init__(self, context: list[Message], middle_context: dict[str, Any]) -> None:
        self.context = context
        self.middle_context = middle_context
        self.pending = None


class SidecarAgent:
    """What a hook sees of the agent inside the sidecar: name, kind, reply, state, context."""

    def __init__(
        self,
        name: str,
        kind: MessageKind,
        reply_id: str,
        session_id: str,
        state: _HostState,
        emit: Any = None,
        user_id: str = "",
    ) -> None:
        self.name = name
        self.kind: MessageKind = kind
        self.reply_id = reply_id
        self.session_id = session_id
        self.user_id = user_id
        """The end user the agent answers (see `Agent.user_id`)."""
        self.state = state
        self._emit = emit

    def emit(self, event: AgentEvent) -> None:
        """Send an event to the agent's reply stream."""
        if self._emit is not None:
            self._emit(event)

    def resolve_model(self, name: str) -> ModelChoice:
        """The model configured as `name` in the agent (resolved there, on call_next)."""
        return ModelChoice(name)


class _Call:
    """The sidecar's side of one invocation."""

    def __init__(self, session: _Session, invocation_id: str, muted: bool) -> None:
        self.session = session
        self.id = invocation_id
        self.inbox: asyncio.Queue[_mw_pb2.InterceptRequest] = asyncio.Queue()
        self.muted = muted
        self.sync: Sync | None = None

    def send(self, **message: Any) -> None:
        if not self.muted:
            self.session.out.put_nowait(_mw_pb2.InterceptResponse(invocation_id=self.id, **message))

    def emit(self, event: AgentEvent) -> None:
        self.send(emit=event_to_proto(event))

    def control(self, **message: Any) -> None:
        """Send a control message, preceded by any state or context change."""
        assert self.sync is not None
        mutation = self.sync.mutation()
        if mutation is not None:
            self.send(mutate=mutation)
        self.send(**message)

    async def receive(self) -> _mw_pb2.InterceptRequest:
        request = await self.inbox.get()
        if request.WhichOneof("message") == "cancel":
            raise asyncio.CancelledError
        return request

    def take_outcome(self, outcome: _mw_pb2.DownstreamOutcome) -> str:
        assert self.sync is not None
        self.sync.take(outcome.state, outcome.context)
        arm = outcome.WhichOneof("result")
        if arm == "error":
            raise downstream_error(c.reply_error_from_pb(outcome.error))
        return arm or ""


MAX_INVOCATIONS_PER_STREAM = 4096
"""Invocations one Intercept stream may have running at once; more fail at once (reason
TOO_MANY_INVOCATIONS), so one agent cannot make a sidecar hold unbounded work."""


class _Session:
    """One Intercept stream: dispatches invocations to tasks and shares per-reply state."""

    def __init__(self, host: MiddlewareServicer) -> None:
        self.host = host
        self.out: asyncio.Queue[_mw_pb2.InterceptResponse | None] = asyncio.Queue()
        self.calls: dict[str, _Call] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.states: dict[str, list[Any]] = {}
        self.tracing = _sdk_tracing()

    async def read(self, requests: AsyncIterator[_mw_pb2.InterceptRequest]) -> None:
        received = self.host.received
        try:
            async for request in requests:
                arm = request.WhichOneof("message")
                received[arm] += 1
                if arm == "invocation":
                    self._start(request.invocation_id, request.invocation)
                    # NOTE(hookmesh): yield once so the new invocation runs (and answers)
                    # before this loop posts its next read: one less wait per round trip.
                    await asyncio.sleep(0)
                elif arm == "cancel":
                    task = self.tasks.get(request.invocation_id)
                    if task is not None:
                        task.cancel()
                else:
                    call = self.calls.get(request.invocation_id)
                    if call is not None:
                        call.inbox.put_nowait(request)
        finally:
            await self.close()
            self.out.put_nowait(None)

    def _start(self, invocation_id: str, invocation: _mw_pb2.HookInvocation) -> None:
        hook = c.HOOK_FROM_PB.get(invocation.hook, "")
        mode = self.host.modes.get(hook, "intercept")
        call = _Call(self, invocation_id, muted=mode == "observe")
        if len(self.tasks) >= MAX_INVOCATIONS_PER_STREAM:
            busy = SidecarError(
                f"the sidecar runs {MAX_INVOCATIONS_PER_STREAM} invocations on this stream",
                reason="TOO_MANY_INVOCATIONS",
            )
            call.send(done=_mw_pb2.HookDone(error=c.error_to_pb(busy)))
            return
        self.calls[invocation_id] = call
        task = asyncio.create_task(self._run(call, hook, mode, invocation))
        self.tasks[invocation_id] = task

    def state_for(self, reply_id: str, fresh: dict[str, Any]) -> dict[str, Any]:
        entry = self.states.get(reply_id)
        if entry is None:
            entry = self.states[reply_id] = [fresh, 0]
        else:
            entry[0].clear()
            entry[0].update(fresh)
        entry[1] += 1
        return entry[0]  # type: ignore[no-any-return]

    def release(self, reply_id: str) -> None:
        entry = self.states.get(reply_id)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.states[reply_id]

    async def _run(
        self, call: _Call, hook: str, mode: str, invocation: _mw_pb2.HookInvocation
    ) -> None:
        mw = self.host.middleware
        key = mw.middleware_key()
        reply_id = invocation.reply_id
        fresh = c.from_struct(invocation.state) if invocation.state.fields else {}
        state = self.state_for(reply_id, fresh)
        context = [message_from_proto(m, "invocation.context") for m in invocation.context]
        agent = SidecarAgent(
            invocation.agent_name,
            c.KIND_FROM_PB.get(invocation.kind, "flat"),
            reply_id,
            invocation.session_id,
            _HostState(context, {key: {reply_id: state}}),
            emit=call.emit,
            user_id=invocation.user_id,
        )
        call.sync = Sync(state, context, hook, key)
        try:
            if not invocation.trace_context and not self.tracing:
                await _RUNNERS[hook](call, mw, hook, mode, agent, invocation)
            else:
                with _tracer.start_as_current_span(
                    f"middleware {key} {hook}",
                    context=propagate.extract(invocation.trace_context),
                    kind=trace.SpanKind.SERVER,
                ):
                    await _RUNNERS[hook](call, mw, hook, mode, agent, invocation)
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            log.warning("middleware %s failed in %s: %s", key, hook, exc, exc_info=exc)
            call.send(done=_mw_pb2.HookDone(error=c.error_to_pb(exc)))
        finally:
            self.release(reply_id)
            self.calls.pop(call.id, None)
            self.tasks.pop(call.id, None)

    async def close(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _abort_failed(context: grpc.aio.ServicerContext, hook: str, exc: Exception) -> None:
    log.warning("middleware failed in %s: %s", hook, exc, exc_info=exc)
    error = RemoteHookError(
        str(exc) or type(exc).__name__, metadata={"hook": hook, "errorType": type(exc).__name__}
    )
    await context.abort_with_status(to_grpc_status(error))


class MiddlewareServicer(_mw_grpc.MiddlewareServiceServicer):
    """Serves one in-process middleware to remote agents."""

    def __init__(self, middleware: Middleware, *, max_message_bytes: int = 0) -> None:
        self.middleware = middleware
        self.received: Counter[str] = Counter()
        """Intercept messages received, by kind (invocation, item, outcome, cancel)."""
        self.modes: dict[str, str] = {}
        self.routes: dict[str, Routes] = {}
        hooks = []
        for hook in _HOOK_ORDER:
            if not middleware.implements(hook):
                continue
            mode = middleware.hook_modes.get(hook, "intercept")  # type: ignore[call-overload]
            self.modes[hook] = mode
            read_only = middleware.read_only_subscriptions.get(hook, ())
            default = (
                ("*",) if ITEMS[hook] and hook not in middleware.read_only_subscriptions else ()
            )
            subscriptions = middleware.subscriptions.get(hook, default)
            try:
                check_subscriptions(hook, subscriptions, read_only)
            except ValueError as exc:
                raise ValueError(f"{middleware.middleware_key()}: {exc}") from None
            self.routes[hook] = Routes.of(mode, subscriptions, read_only)
            hooks.append(
                _mw_pb2.HookSpec(
                    hook=c.HOOK_TO_PB[hook],
                    mode=c.MODE_TO_PB[mode],
                    subscriptions=subscriptions,
                    read_only_subscriptions=read_only,
                )
            )
        self.tools = {t.name: t for t in middleware.list_tools()}
        self.description = _mw_pb2.DescribeResponse(
            protocol_version=c.PROTOCOL_VERSION,
            middleware_key=middleware.middleware_key(),
            hooks=hooks,
            needs_context=middleware.needs_context,
            tools=[c.tool_spec(t) for t in self.tools.values()],
            failure_mode=_mw_pb2.FAILURE_MODE_OPEN
            if middleware.failure_mode == "fail_open"
            else _mw_pb2.FAILURE_MODE_CLOSED,
            max_message_bytes=max_message_bytes,
        )

    async def Describe(
        self, request: _mw_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> _mw_pb2.DescribeResponse:
        return self.description

    async def Intercept(
        self,
        request_iterator: AsyncIterator[_mw_pb2.InterceptRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[_mw_pb2.InterceptResponse]:
        session = _Session(self)
        reader = asyncio.create_task(session.read(request_iterator))
        try:
            while (response := await session.out.get()) is not None:
                yield response
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await session.close()

    def _agent(
        self,
        name: str,
        kind: int,
        reply_id: str,
        session_id: str,
        state: Any,
        context: Any,
        user_id: str = "",
    ) -> SidecarAgent:
        key = self.middleware.middleware_key()
        messages = [message_from_proto(m, "context") for m in context]
        fresh = c.from_struct(state)
        agent_state = _HostState(messages, {key: {reply_id: fresh}})
        return SidecarAgent(
            name,
            c.KIND_FROM_PB.get(kind, "flat"),
            reply_id,
            session_id,
            agent_state,
            user_id=user_id,
        )

    async def TransformSystemPrompt(
        self, request: _mw_pb2.TransformSystemPromptRequest, context: grpc.aio.ServicerContext
    ) -> _mw_pb2.TransformSystemPromptResponse:
        agent = self._agent(
            request.agent_name, 0, request.reply_id, "", request.state, (), request.user_id
        )
        sync = Sync(self.middleware.state(agent), agent.state.context, "on_system_prompt", "")  # type: ignore[arg-type]
        try:
            prompt = await self.middleware.on_system_prompt(agent, request.prompt)  # type: ignore[arg-type]
        except Exception as exc:
            await _abort_failed(context, "on_system_prompt", exc)
        return _mw_pb2.TransformSystemPromptResponse(prompt=prompt, mutation=sync.mutation())

    async def AfterAgent(
        self, request: _mw_pb2.AfterAgentRequest, context: grpc.aio.ServicerContext
    ) -> _mw_pb2.AfterAgentResponse:
        try:
            agent = self._agent(
                request.agent_name,
                request.kind,
                request.reply_id,
                request.session_id,
                request.state,
                request.context,
                request.user_id,
            )
            final = message_from_proto(request.final_message, "final_message")
        except SchemaError as exc:
            await context.abort_with_status(to_grpc_status(exc))
        sync = Sync(self.middleware.state(agent), agent.state.context, "after_agent", "")  # type: ignore[arg-type]
        try:
            await self.middleware.after_agent(agent, final)  # type: ignore[arg-type]
        except Exception as exc:
            await _abort_failed(context, "after_agent", exc)
        return _mw_pb2.AfterAgentResponse(mutation=sync.mutation())

    async def CallTool(
        self, request: _mw_pb2.CallToolRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_mw_pb2.CallToolResponse]:
        tool = self.tools.get(request.name)
        if tool is None:
            missing = RequestError(
                grpc.StatusCode.NOT_FOUND,
                "TOOL_NOT_FOUND",
                f"this sidecar has no tool {request.name[:64]!r}",
                metadata={"tool": request.name[:64]},
            )
            await context.abort_with_status(to_grpc_status(missing))
        assert tool is not None
        try:
            arguments = tool.parse_arguments(request.arguments)
        except ValueError as exc:
            await context.abort_with_status(
                to_grpc_status(
                    SchemaError.single("arguments", str(exc), reason="INVALID_ARGUMENTS")
                )
            )
        try:
            async for piece in tool.run(arguments):
                if isinstance(piece, str):
                    yield _mw_pb2.CallToolResponse(text=piece)
                else:
                    yield _mw_pb2.CallToolResponse(media=block_to_proto(piece))
        except Exception as exc:
            yield _mw_pb2.CallToolResponse(text=f"Error: {type(exc).__name__}: {exc}")
            yield _mw_pb2.CallToolResponse(end=_content_pb2.TOOL_RESULT_STATE_ERROR)
            return
        yield _mw_pb2.CallToolResponse(end=_content_pb2.TOOL_RESULT_STATE_SUCCESS)
