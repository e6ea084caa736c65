"""The sidecar host: serves any in-process middleware as a MiddlewareService."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
from opentelemetry import propagate, trace

from hookmesh.errors import SchemaError
from hookmesh.middleware import GUARDRAIL_TRIPPED, Middleware, is_trip
from hookmesh.remote import _codec as c
from hookmesh.remote._call import HostCall
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._runners import RUNNERS
from hookmesh.remote._sidecar_agent import HostState, SidecarAgent
from hookmesh.remote._subscriptions import Routes
from hookmesh.remote._sync import Sync
from hookmesh.remote._tools import serve_call
from hookmesh.schema import Message, message_from_proto, output_from_proto
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

log = logging.getLogger("hookmesh.sidecar")
_tracer = trace.get_tracer("hookmesh.sidecar")


def _sdk_tracing() -> bool:
    """Whether an SDK tracer provider is installed (else spans would not be recorded)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


MAX_INVOCATIONS_PER_STREAM = 4096
"""Invocations one Intercept stream may have running at once; more fail at once (reason
TOO_MANY_INVOCATIONS), so one agent cannot make a sidecar hold unbounded work."""


class _Session:
    """One Intercept stream: dispatches invocations to tasks and shares per-reply state."""

    def __init__(self, host: MiddlewareServicer) -> None:
        self.host = host
        self.out: asyncio.Queue[_mw_pb2.InterceptResponse | None] = asyncio.Queue()
        self.calls: dict[str, HostCall] = {}
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
        call = HostCall(
            self.out, self.host.routes, self.host.tools, invocation_id, muted=mode == "observe"
        )
        if len(self.tasks) >= MAX_INVOCATIONS_PER_STREAM:
            busy = SidecarError(
                f"the sidecar runs {MAX_INVOCATIONS_PER_STREAM} invocations on this stream",
                reason="TOO_MANY_INVOCATIONS",
            )
            call.send(done=_mw_pb2.HookDone(error=c.error_to_pb(busy)))
            return
        try:
            state = invocation.state
            fresh = c.from_struct(state, "invocation.state") if state.fields else {}
            context = [message_from_proto(m, "invocation.context") for m in invocation.context]
        except SchemaError as exc:
            # The agent's input, not the middleware's failure: this invocation ends at once.
            call.send(done=_mw_pb2.HookDone(error=c.error_to_pb(exc)))
            return
        self.calls[invocation_id] = call
        task = asyncio.create_task(self._run(call, hook, mode, invocation, fresh, context))
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
        self,
        call: HostCall,
        hook: str,
        mode: str,
        invocation: _mw_pb2.HookInvocation,
        fresh: dict[str, Any],
        context: list[Message],
    ) -> None:
        mw = self.host.middleware
        key = mw.middleware_key()
        reply_id = invocation.reply_id
        state = self.state_for(reply_id, fresh)
        agent = SidecarAgent(
            invocation.agent_name,
            c.KIND_FROM_PB.get(invocation.kind, "flat"),
            reply_id,
            invocation.session_id,
            HostState(context, {key: {reply_id: state}}),
            emit=call.emit,
            user_id=invocation.user_id,
        )
        call.sync = Sync(state, context, hook, key)
        try:
            if not invocation.trace_context and not self.tracing:
                await RUNNERS[hook](call, mw, hook, mode, agent, invocation)
            else:
                with _tracer.start_as_current_span(
                    f"middleware {key} {hook}",
                    context=propagate.extract(invocation.trace_context),
                    kind=trace.SpanKind.SERVER,
                ):
                    await RUNNERS[hook](call, mw, hook, mode, agent, invocation)
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


def _hook_failed(hook: str, exc: Exception) -> RemoteHookError:
    """ABORTED ``MIDDLEWARE_FAILED`` for whatever the middleware raised in a unary hook, a
    `HookmeshError` included: the agent's proxy blames the middleware, not the sidecar."""
    if is_trip(exc):  # a guardrail stopped the reply: its reason and details go as they are
        return RemoteHookError(str(exc), reason=GUARDRAIL_TRIPPED, metadata=exc.metadata)
    log.warning("middleware failed in %s: %s", hook, exc, exc_info=exc)
    return RemoteHookError(
        str(exc) or type(exc).__name__, metadata={"hook": hook, "errorType": type(exc).__name__}
    )


class MiddlewareServicer(_mw_grpc.MiddlewareServiceServicer):
    """Serves one in-process middleware to remote agents."""

    def __init__(self, middleware: Middleware, *, max_message_bytes: int = 0) -> None:
        self.middleware = middleware
        self.received: Counter[str] = Counter()
        """Intercept messages received, by kind (invocation, item, outcome, cancel)."""
        described = middleware.describe()
        self.modes: dict[str, str] = {hook: spec.mode for hook, spec in described.hooks.items()}
        self.routes = {hook: Routes.of(spec) for hook, spec in described.hooks.items()}
        # Only the tools the description names: a middleware may serve fewer than it has.
        self.tools = {t.name: t for t in middleware.list_tools() if t.name in described.tools}
        self.description = c.description_to_pb(
            described, list(self.tools.values()), max_message_bytes
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
            # A request the stream could not read (undecodable) ends the call with its error.
            [failed] = await asyncio.gather(reader, return_exceptions=True)
            if isinstance(failed, Exception):
                raise failed
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
        agent_state = HostState(messages, {key: {reply_id: fresh}})
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
        sync = Sync(self.middleware.state(agent), agent.state.context, "on_system_prompt", "")
        try:
            prompt = await self.middleware.on_system_prompt(agent, request.prompt)
        except Exception as exc:
            raise _hook_failed("on_system_prompt", exc) from exc
        return _mw_pb2.TransformSystemPromptResponse(prompt=prompt, mutation=sync.mutation())

    async def AfterAgent(
        self, request: _mw_pb2.AfterAgentRequest, context: grpc.aio.ServicerContext
    ) -> _mw_pb2.AfterAgentResponse:
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
        if request.HasField("output"):
            agent.output = output_from_proto(request.output, "output")
        sync = Sync(self.middleware.state(agent), agent.state.context, "after_agent", "")
        try:
            await self.middleware.after_agent(agent, final)
        except Exception as exc:
            raise _hook_failed("after_agent", exc) from exc
        return _mw_pb2.AfterAgentResponse(mutation=sync.mutation())

    async def CallTool(
        self, request: _mw_pb2.CallToolRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_mw_pb2.CallToolResponse]:
        async for response in serve_call(self.middleware, self.tools, request, context):
            yield response
