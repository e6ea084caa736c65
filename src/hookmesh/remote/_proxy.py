"""RemoteMiddleware: a middleware whose hooks run in a sidecar, over one multiplexed stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import propagate, trace

from hookmesh._security import ClientTLS, open_channel
from hookmesh.agent.models import ModelResponse
from hookmesh.agent.tools import Tool
from hookmesh.middleware import FailureMode, Middleware, PermissionDecision
from hookmesh.remote import _codec as c
from hookmesh.remote._invocation import (
    RemoteHookError,
    SidecarError,
    _HookSpec,
    _Invocation,
    _Stream,
)
from hookmesh.schema import (
    HINT_METADATA_KEY,
    AgentEvent,
    Message,
    block_from_proto,
    event_to_proto,
    is_hint,
    message_from_proto,
    message_to_proto,
    to_kind,
)
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.agent import Agent

log = logging.getLogger("hookmesh.remote")

DEFAULT_TIMEOUT = 5.0
"""Seconds the agent waits for each sidecar message."""

# Reconnect quickly after a sidecar restart instead of gRPC's default 1 s → 120 s backoff.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 30000),
    ("grpc.keepalive_timeout_ms", 10000),
]


class RemoteMiddleware(Middleware):
    """A middleware served by a sidecar; the agent cannot tell it from a local one.

    Build it with `await RemoteMiddleware.connect(target, ...)`, which asks the sidecar what
    it is (Describe) so the agent can bucket its hooks. Every onion-hook invocation runs over
    one multiplexed Intercept stream; downstream items the sidecar did not subscribe to pass
    with no message, ``observe`` hooks never wait, and each message has a deadline after which
    the failure mode decides. A broken stream is reopened for the next invocation.

    Args:
        target: The sidecar's address, e.g. ``127.0.0.1:7001``.
        failure_mode: ``fail_closed`` ends the reply on sidecar errors; ``fail_open`` skips.
        timeout: Seconds to wait for each sidecar message.
        tls: TLS or mTLS settings; plaintext when None.
        token: Bearer token sent with every call (a secret: never logged).
    """

    def __init__(
        self,
        target: str,
        description: _mw_pb2.DescribeResponse,
        channel: grpc.aio.Channel,
        *,
        failure_mode: FailureMode = "fail_closed",
        timeout: float = DEFAULT_TIMEOUT,
        token: str | None = None,
    ) -> None:
        self.target = target
        self.failure_mode = failure_mode
        self.timeout = timeout
        self.needs_context = description.needs_context
        self._key = description.middleware_key
        self._channel = channel
        self._stub = _mw_grpc.MiddlewareServiceStub(channel)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._specs: dict[str, _HookSpec] = {}
        for spec in description.hooks:
            subs = frozenset(spec.subscriptions)
            self._specs[c.HOOK_FROM_PB[spec.hook]] = _HookSpec(
                c.MODE_FROM_PB.get(spec.mode, "intercept"), "*" in subs, subs
            )
        self._tools = [self._tool_proxy(spec) for spec in description.tools]
        self._stream: _Stream | None = None

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        failure_mode: FailureMode = "fail_closed",
        timeout: float = DEFAULT_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> RemoteMiddleware:
        """Connect to the sidecar at `target` and learn its hooks.

        Raises:
            SidecarError: The sidecar did not answer Describe in time, or speaks an unknown
                protocol version.
        """
        channel = open_channel(target, tls, _CHANNEL_OPTIONS)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        try:
            description = await _mw_grpc.MiddlewareServiceStub(channel).Describe(
                _mw_pb2.DescribeRequest(protocol_version=c.PROTOCOL_VERSION),
                timeout=timeout,
                metadata=metadata,
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as exc:
            await channel.close()
            raise SidecarError(
                f"sidecar {target} did not describe itself: {exc.code().name}: {exc.details()}"
            ) from None
        if description.protocol_version != c.PROTOCOL_VERSION:
            await channel.close()
            raise SidecarError(
                f"sidecar {target} speaks protocol {description.protocol_version}, "
                f"not {c.PROTOCOL_VERSION}"
            )
        return cls(
            target, description, channel, failure_mode=failure_mode, timeout=timeout, token=token
        )

    async def aclose(self) -> None:
        """Close the stream and the channel."""
        if self._stream is not None:
            await self._stream.close()
            self._stream = None
        await self._channel.close()

    async def wait_ready(self, timeout: float) -> None:
        """Wait until the channel to the sidecar is connected (e.g. after a restart)."""
        async with asyncio.timeout(timeout):
            await self._channel.channel_ready()

    def middleware_key(self) -> str:
        return self._key

    def implements(self, hook: str) -> bool:
        return hook in self._specs

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    # --- plumbing --------------------------------------------------------------------------

    def _invoke(self, agent: Agent, hook: str, **kwargs_arm: Any) -> _Invocation:
        stream = self._stream
        if stream is None or not stream.alive:
            stream = self._stream = _Stream(self._stub, self._metadata)
        inv = _Invocation(self, stream, agent, hook)
        request = _mw_pb2.InterceptRequest(invocation_id=inv.id)
        invocation = request.invocation  # filled in place: no copies of the message
        invocation.hook = c.HOOK_TO_PB[hook]
        invocation.reply_id = agent.reply_id
        invocation.agent_name = agent.name
        invocation.session_id = agent.session_id
        invocation.kind = c.KIND_TO_PB[agent.kind]
        inv.fill_state(invocation)
        if self.needs_context:
            invocation.context.extend(inv.context())
        for arm, args in kwargs_arm.items():
            getattr(invocation, arm).MergeFrom(args)
        if trace.get_current_span().get_span_context().is_valid:
            propagate.inject(invocation.trace_context)
        stream.send(request)
        return inv

    def _apply(self, agent: Agent, mutation: _mw_pb2.StateMutation, hook: str) -> None:
        """Apply a sidecar's state/context mutation (only to what it may touch)."""
        if mutation.HasField("state"):
            state = self.state(agent)
            state.clear()
            state.update(c.from_struct(mutation.state))
        context = agent.state.context
        if mutation.remove_message_ids:
            ids = set(mutation.remove_message_ids)
            context[:] = [m for m in context if not (m.id in ids and self._owns_hint(m))]
        if mutation.append_messages:
            new = [
                message_from_proto(pb, "mutate.append_messages") for pb in mutation.append_messages
            ]
            context.extend(to_kind(new, agent.kind))
        if mutation.HasField("replace_context") and self.needs_context:
            new = [
                message_from_proto(pb, "mutate.replace_context")
                for pb in mutation.replace_context.messages
            ]
            context[:] = to_kind(new, agent.kind)

    def _owns_hint(self, msg: Message) -> bool:
        if not is_hint(msg):
            return False
        if msg.kind == "flat":
            return (msg.metadata or {}).get(HINT_METADATA_KEY) == self._key
        return all(b.source == self._key for b in msg.blocks if b.type == "hint")

    def _tool_proxy(self, spec: _mw_pb2.ToolSpec) -> Tool:
        async def call(**arguments: Any) -> AsyncIterator[Any]:
            request = _mw_pb2.CallToolRequest(name=spec.name, arguments=c.arguments_json(arguments))
            try:
                async for piece in self._stub.CallTool(
                    request, timeout=self.timeout, metadata=self._metadata
                ):
                    arm = piece.WhichOneof("piece")
                    if arm == "text":
                        yield piece.text
                    elif arm == "media":
                        yield block_from_proto(piece.media, "media")
                    elif arm == "end" and piece.end == _content_pb2.TOOL_RESULT_STATE_ERROR:
                        raise RemoteHookError(f"tool {spec.name} failed in the sidecar")
            except grpc.aio.AioRpcError as exc:
                raise SidecarError(
                    f"tool {spec.name}: {exc.code().name}: {exc.details()}"
                ) from None

        definition = c.tool_definition(spec)
        return Tool(
            name=spec.name,
            description=spec.description,
            parameters=definition["parameters"],
            func=call,
            read_only=spec.read_only,
            concurrency_safe=spec.concurrency_safe,
            return_directly=spec.return_directly,
            needs_confirmation=spec.needs_confirmation,
        )

    async def _unary_call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.ABORTED:
                raise RemoteHookError(exc.details() or "the sidecar's hook failed") from None
            raise SidecarError(
                f"sidecar {self.target}: {exc.code().name}: {exc.details()}"
            ) from None

    # --- onion hooks -----------------------------------------------------------------------

    def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ReplyArgs(
            inputs=[message_to_proto(m) for m in kwargs.get("inputs", ())],
            resume=kwargs.get("resume") is not None,
        )
        return self._events("on_reply", agent, kwargs, next_handler, reply=args)

    def on_reasoning(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ReasoningArgs(tool_choice=kwargs.get("tool_choice", "auto"))
        return self._events("on_reasoning", agent, kwargs, next_handler, reasoning=args)

    def on_acting(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ActingArgs(tool_call=c.tool_call_to_pb(kwargs["tool_call"]))
        return self._events("on_acting", agent, kwargs, next_handler, acting=args)

    async def _events(
        self, hook: str, agent: Agent, kwargs: dict[str, Any], next_handler: Any, **arm: Any
    ) -> AsyncIterator[AgentEvent]:
        spec = self._specs[hook]
        inv = self._invoke(agent, hook, **arm)
        finished = False
        try:
            if spec.mode == "observe":
                async for event in next_handler():
                    if spec.wants(event.type):
                        inv.send(item=_mw_pb2.DownstreamItem(event=event_to_proto(event)))
                    yield event
                inv.outcome(stream_end=_mw_pb2.StreamEnd())
                finished = True
                return
            events, message = await inv.wait("call_next")
            for event in events:
                yield event
            if message.WhichOneof("message") == "done":
                finished = True
                return
            stream = next_handler(**self._overrides(hook, message.call_next, agent, kwargs))
            if spec.mode == "pre_only":
                finished = True
                inv.close(cancel=False)
                async for event in stream:
                    yield event
                return
            iterator = aiter(stream)
            while True:
                try:
                    event = await anext(iterator)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    inv.outcome(error=c.error_to_pb(exc))
                    events, _ = await inv.wait("done", failed=True)
                    for emitted in events:
                        yield emitted
                    finished = True
                    raise
                if not spec.wants(event.type):
                    yield event
                    continue
                inv.send(
                    item=_mw_pb2.DownstreamItem(state=inv.state(), event=event_to_proto(event))
                )
                events, message = await inv.wait("verdict")
                for emitted in events:
                    yield emitted
                if message.WhichOneof("message") == "done":
                    finished = True
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        await aclose()
                    return
                if not message.verdict.drop:
                    yield event
            inv.outcome(stream_end=_mw_pb2.StreamEnd())
            events, _ = await inv.wait("done")
            for emitted in events:
                yield emitted
            finished = True
        finally:
            inv.close(cancel=not finished)

    def _overrides(
        self, hook: str, call_next: _mw_pb2.CallNext, agent: Agent, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        arm = call_next.WhichOneof("overrides")
        if arm is None:
            return {}
        pb = getattr(call_next, arm)
        out: dict[str, Any] = {}
        if arm in ("reasoning", "model_call") and pb.HasField("tool_choice"):
            out["tool_choice"] = pb.tool_choice
        if arm == "model_call" and pb.HasField("messages"):
            out["messages"] = to_kind(
                [message_from_proto(m, "call_next.messages") for m in pb.messages.messages],
                agent.kind,
            )
        if arm == "model_call" and pb.HasField("tools"):
            keep = frozenset(pb.tools.names)
            out["tools"] = [t for t in kwargs["tools"] if t["name"] in keep]
        if arm == "acting" and pb.HasField("arguments"):
            call = kwargs["tool_call"].model_copy(update={"arguments": pb.arguments})
            out["tool_call"] = call
            out["arguments"] = kwargs["tool"].parse_arguments(pb.arguments)
        return out

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        spec = self._specs["on_model_call"]
        args = _mw_pb2.ModelCallArgs(
            model_name=kwargs["model"].model_name,
            provider_name=kwargs["model"].provider_name,
            messages=[message_to_proto(m) for m in kwargs["messages"]]
            if self.needs_context
            else [],
            tools=[c.tool_spec(t) for t in kwargs["tools"]],
            tool_choice=kwargs["tool_choice"],
        )
        inv = self._invoke(agent, "on_model_call", model_call=args)
        finished = False
        try:
            if spec.mode == "observe":
                result = await next_handler()
                if isinstance(result, ModelResponse):
                    inv.outcome(model_response=c.response_to_pb(result))
                    finished = True
                    return result
                inv.outcome(stream_start=_mw_pb2.StreamStart())
                finished = True
                return self._observe_stream(inv, result, spec)
            events, message = await inv.wait("call_next")
            for event in events:
                agent.emit(event)
            if message.WhichOneof("message") == "done":
                finished = True
                if message.done.WhichOneof("result") != "model_response":
                    raise SidecarError(
                        "a short-circuiting on_model_call must return a model response"
                    )
                return c.response_from_pb(message.done.model_response)
            overrides = self._overrides("on_model_call", message.call_next, agent, kwargs)
            if spec.mode == "pre_only":
                finished = True
                return await next_handler(**overrides)
            try:
                result = await next_handler(**overrides)
            except Exception as exc:
                inv.outcome(error=c.error_to_pb(exc))
                events, _ = await inv.wait("done", failed=True)
                for event in events:
                    agent.emit(event)
                finished = True
                raise
            if isinstance(result, ModelResponse):
                inv.outcome(model_response=c.response_to_pb(result))
                events, message = await inv.wait("done")
                for event in events:
                    agent.emit(event)
                finished = True
                if message.done.WhichOneof("result") == "model_response":
                    return c.response_from_pb(message.done.model_response)
                return result
            inv.outcome(stream_start=_mw_pb2.StreamStart())
            finished = True
            return self._intercept_stream(inv, result, spec)
        finally:
            if not finished:
                inv.close(cancel=True)

    async def _observe_stream(
        self, inv: _Invocation, stream: Any, spec: _HookSpec
    ) -> AsyncIterator[Any]:
        try:
            async for chunk in stream:
                if spec.wants("chunk"):
                    inv.send(item=_mw_pb2.DownstreamItem(chunk=c.chunk_to_pb(chunk)))
                yield chunk
            inv.outcome(stream_end=_mw_pb2.StreamEnd())
        finally:
            inv.close(cancel=False)

    async def _intercept_stream(
        self, inv: _Invocation, stream: Any, spec: _HookSpec
    ) -> AsyncIterator[Any]:
        finished = False
        try:
            try:
                async for chunk in stream:
                    if spec.wants("chunk"):
                        inv.send(item=_mw_pb2.DownstreamItem(chunk=c.chunk_to_pb(chunk)))
                    yield chunk
            except Exception as exc:
                inv.outcome(error=c.error_to_pb(exc))
                await self._finish(inv, failed=True)
                finished = True
                raise
            inv.outcome(stream_end=_mw_pb2.StreamEnd())
            await self._finish(inv)
            finished = True
        finally:
            inv.close(cancel=not finished)

    async def _finish(self, inv: _Invocation, failed: bool = False) -> None:
        events, _ = await inv.wait("done", failed=failed)
        for event in events:
            inv.agent.emit(event)

    async def on_check_permission(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        args = _mw_pb2.CheckPermissionArgs(
            tool_call=c.tool_call_to_pb(kwargs["tool_call"]), tool=c.tool_spec(kwargs["tool"])
        )
        inv = self._invoke(agent, "on_check_permission", check_permission=args)
        finished = False
        try:
            events, message = await inv.wait("call_next")
            for event in events:
                agent.emit(event)
            if message.WhichOneof("message") == "call_next":
                decision = await next_handler()
                inv.outcome(permission=c.decision_to_pb(decision))
                events, message = await inv.wait("done")
                for event in events:
                    agent.emit(event)
            else:
                decision = None
            finished = True
            if message.done.WhichOneof("result") == "permission":
                return c.decision_from_pb(message.done.permission)
            if decision is None:
                raise SidecarError("a short-circuiting on_check_permission must return a decision")
            return decision  # type: ignore[no-any-return]
        finally:
            inv.close(cancel=not finished)

    async def on_compress_context(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> None:
        inv = self._invoke(
            agent, "on_compress_context", compress_context=_mw_pb2.CompressContextArgs()
        )
        finished = False
        try:
            events, message = await inv.wait("call_next")
            if message.WhichOneof("message") == "call_next":
                await next_handler()
                inv.outcome(stream_end=_mw_pb2.StreamEnd())
                more, _ = await inv.wait("done")
                events.extend(more)
            for event in events:
                agent.emit(event)
            finished = True
        finally:
            inv.close(cancel=not finished)

    # --- unary hooks -----------------------------------------------------------------------

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        request = _mw_pb2.TransformSystemPromptRequest(
            prompt=prompt,
            reply_id=agent.reply_id,
            agent_name=agent.name,
            state=c.struct(self.state(agent)),
        )
        response = await self._unary_call(self._stub.TransformSystemPrompt, request)
        self._apply(agent, response.mutation, "on_system_prompt")
        return response.prompt  # type: ignore[no-any-return]

    async def after_agent(self, agent: Agent, final: Message) -> None:
        request = _mw_pb2.AfterAgentRequest(
            reply_id=agent.reply_id,
            agent_name=agent.name,
            session_id=agent.session_id,
            kind=c.KIND_TO_PB[agent.kind],
            final_message=message_to_proto(final),
            state=c.struct(self.state(agent)),
            context=[message_to_proto(m) for m in agent.state.context]
            if self.needs_context
            else [],
        )
        response = await self._unary_call(self._stub.AfterAgent, request)
        self._apply(agent, response.mutation, "after_agent")
