"""RemoteMiddleware: a middleware whose hooks run in a sidecar, over one multiplexed stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import duration_pb2
from opentelemetry import propagate, trace

from hookmesh._security import ClientTLS, open_channel
from hookmesh.errors import reason_of, status_of
from hookmesh.middleware import FailureMode, PermissionDecision
from hookmesh.remote import _codec as c
from hookmesh.remote._changes import apply_mutation
from hookmesh.remote._drive_calls import CallHookDriver
from hookmesh.remote._drive_events import EventHookDriver
from hookmesh.remote._invocation import (
    RemoteHookError,
    SidecarError,
    _Invocation,
    _Stream,
    protocol_error,
)
from hookmesh.remote._subscriptions import Routes, check_subscriptions
from hookmesh.remote._tools import tool_proxy
from hookmesh.schema import AgentEvent, Message, message_to_proto
from hookmesh.tools import Tool
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.agent import Agent

log = logging.getLogger("hookmesh.remote")

_GRPC_DEFAULT_MESSAGE_BYTES = 4 * 1024 * 1024
"""A sidecar's receive limit when its Describe states none."""
DEFAULT_TIMEOUT = 5.0
"""Seconds the agent waits for each sidecar message."""

# Reconnect quickly after a sidecar restart instead of gRPC's default 1 s → 120 s backoff.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]
_FAILURE_FROM_PB: dict[int, FailureMode] = {_mw_pb2.FAILURE_MODE_OPEN: "fail_open"}


class RemoteMiddleware(EventHookDriver, CallHookDriver):
    """A middleware served by a sidecar; the agent cannot tell it from a local one.

    Build it with `await RemoteMiddleware.connect(target, ...)`, which asks the sidecar what
    it is (Describe) so the agent can bucket its hooks. Every onion-hook invocation runs over
    one multiplexed Intercept stream; downstream items the sidecar did not subscribe to pass
    with no message, ``observe`` hooks never wait, and each message has a deadline after which
    the failure mode decides. A broken stream is reopened for the next invocation. A
    ``fail_open`` middleware whose sidecar is down at connect time implements no hook until a
    background Describe succeeds; agents built after that use it.

    Args:
        target: The sidecar's address: ``host:port``, or ``unix:///path`` for a Unix socket.
        failure_mode: ``fail_closed`` ends the reply on sidecar errors; ``fail_open`` skips;
            None takes the sidecar's preference (Describe), ``fail_closed`` when it has none.
        timeout: Seconds to wait for each sidecar message.
        tls: TLS or mTLS settings; plaintext when None.
        token: Bearer token sent with every call (a secret: never logged).
    """

    def __init__(
        self,
        target: str,
        description: _mw_pb2.DescribeResponse | None,
        channel: grpc.aio.Channel,
        *,
        failure_mode: FailureMode | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        token: str | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.failure_mode = failure_mode or "fail_closed"
        self.needs_context = False
        self._configured_mode = failure_mode
        self._key = ""
        self._channel = channel
        self.stub = _mw_grpc.MiddlewareServiceStub(channel)
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._timeout_pb = duration_pb2.Duration()
        self._timeout_pb.FromNanoseconds(int(timeout * 1e9))
        self._routes: dict[str, Routes] = {}
        self._tools: list[Tool] = []
        self._stream: _Stream | None = None
        self._described = asyncio.Event()
        self._describing: asyncio.Task[None] | None = None
        if description is not None:
            self._adopt(description)

    def _adopt(self, description: _mw_pb2.DescribeResponse) -> None:
        """Take the sidecar's description.

        Raises:
            SidecarError: SIDECAR_PROTOCOL_ERROR for an unknown version or subscription.
        """
        if description.protocol_version != c.PROTOCOL_VERSION:
            raise protocol_error(
                f"sidecar {self.target} speaks protocol {description.protocol_version}, "
                f"not {c.PROTOCOL_VERSION}",
                protocolVersion=str(description.protocol_version),
            )
        routes = {}
        for spec in description.hooks:
            hook = c.HOOK_FROM_PB.get(spec.hook)
            if hook is None:
                raise protocol_error(f"sidecar {self.target} describes an unknown hook")
            try:
                check_subscriptions(hook, spec.subscriptions, spec.read_only_subscriptions)
            except ValueError as exc:
                raise protocol_error(f"sidecar {self.target}: {exc}", hook=hook) from None
            routes[hook] = Routes.of(
                c.MODE_FROM_PB.get(spec.mode, "intercept"),
                spec.subscriptions,
                spec.read_only_subscriptions,
            )
        self._key = description.middleware_key
        self.needs_context = description.needs_context
        self.max_message_bytes = description.max_message_bytes or _GRPC_DEFAULT_MESSAGE_BYTES
        if self._configured_mode is None:
            self.failure_mode = _FAILURE_FROM_PB.get(description.failure_mode, "fail_closed")
        self._tools = [tool_proxy(self, spec) for spec in description.tools]
        self._routes = routes
        self._described.set()

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        failure_mode: FailureMode | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> RemoteMiddleware:
        """Connect to the sidecar at `target` and learn its hooks.

        A ``fail_open`` middleware whose sidecar does not answer is returned anyway, with a
        warning: it implements no hook until a background Describe succeeds.

        Raises:
            SidecarError: The sidecar did not answer Describe in time (unless ``fail_open``),
                or its description is invalid (unknown protocol version or subscription).
        """
        channel = open_channel(target, tls, _CHANNEL_OPTIONS)
        mw = cls(target, None, channel, failure_mode=failure_mode, timeout=timeout, token=token)
        try:
            # NOTE(hookmesh): fail_open does not wait for a sidecar that is down: the agent
            # starts without it and a background Describe picks it up.
            mw._adopt(await mw._describe(wait=failure_mode != "fail_open"))
        except grpc.aio.AioRpcError as exc:
            if failure_mode != "fail_open":
                await channel.close()
                raise SidecarError(
                    f"sidecar {target} did not describe itself: {exc.code().name}",
                    reason="SIDECAR_UNAVAILABLE",
                    metadata={"grpcCode": exc.code().name},
                ) from None
            log.warning(
                "sidecar %s did not describe itself (%s): skipped until it does (fail_open)",
                target,
                exc.code().name,
            )
            mw._describing = asyncio.create_task(mw._describe_later())
        except SidecarError:
            await channel.close()
            raise
        return mw

    async def _describe(self, wait: bool = True) -> _mw_pb2.DescribeResponse:
        return await self.stub.Describe(  # type: ignore[no-any-return]
            _mw_pb2.DescribeRequest(protocol_version=c.PROTOCOL_VERSION),
            timeout=self.timeout,
            metadata=self.metadata,
            wait_for_ready=wait,
        )

    async def _describe_later(self) -> None:
        while True:
            try:
                description = await self._describe()
            except grpc.aio.AioRpcError:
                continue
            try:
                self._adopt(description)
            except SidecarError as exc:
                log.error("sidecar %s stays skipped: %s", self.target, exc)
                return
            log.warning("sidecar %s described itself: new agents use it", self.target)
            return

    async def aclose(self) -> None:
        """Close the stream and the channel."""
        if self._describing is not None:
            self._describing.cancel()
            await asyncio.gather(self._describing, return_exceptions=True)
        if self._stream is not None:
            await self._stream.close()
            self._stream = None
        await self._channel.close()

    async def wait_ready(self, timeout: float) -> None:
        """Wait until the sidecar has described itself and the channel is connected."""
        async with asyncio.timeout(timeout):
            await self._described.wait()
            await self._channel.channel_ready()

    def middleware_key(self) -> str:
        return self._key

    def implements(self, hook: str) -> bool:
        return hook in self._routes

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def apply(self, agent: Agent, mutation: _mw_pb2.StateMutation) -> None:
        """Apply a sidecar's state/context mutation (only to what it may touch)."""
        apply_mutation(self, agent, mutation)

    # --- plumbing --------------------------------------------------------------------------

    def _invoke(self, agent: Agent, hook: str, **kwargs_arm: Any) -> _Invocation:
        stream = self._stream
        if stream is None or not stream.alive:
            stream = self._stream = _Stream(self.stub, self.metadata, self.max_message_bytes)
        inv = _Invocation(self, stream, agent, hook)
        request = _mw_pb2.InterceptRequest(invocation_id=inv.id)
        invocation = request.invocation  # filled in place: no copies of the message
        invocation.hook = c.HOOK_TO_PB[hook]
        invocation.reply_id = agent.reply_id
        invocation.agent_name = agent.name
        invocation.session_id = agent.session_id
        invocation.user_id = agent.user_id
        invocation.kind = c.KIND_TO_PB[agent.kind]
        invocation.message_timeout.CopyFrom(self._timeout_pb)
        inv.fill_state(invocation)
        if self.needs_context:
            invocation.context.extend(inv.context())
        for arm, args in kwargs_arm.items():
            getattr(invocation, arm).MergeFrom(args)
        if trace.get_current_span().get_span_context().is_valid:
            propagate.inject(invocation.trace_context)
        try:
            inv.queue(request)
        except SidecarError:
            del stream.invocations[inv.id]
            raise
        return inv

    async def _unary_call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.ABORTED:
                status = status_of(exc)
                raise RemoteHookError(
                    exc.details() or "the sidecar's hook failed",
                    reason=reason_of(status) if status is not None else "",
                ) from None
            raise SidecarError(
                f"sidecar {self.target}: {exc.code().name}",
                reason="SIDECAR_DEADLINE_EXCEEDED"
                if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                else "SIDECAR_UNAVAILABLE",
                metadata={"grpcCode": exc.code().name},
            ) from None

    # --- onion hooks -----------------------------------------------------------------------

    def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ReplyArgs(
            inputs=[message_to_proto(m) for m in kwargs.get("inputs", ())],
            resume=kwargs.get("resume") is not None,
        )
        inv = self._invoke(agent, "on_reply", reply=args)
        return self.drive_events(inv, self._routes["on_reply"], kwargs, next_handler)

    def on_reasoning(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ReasoningArgs(tool_choice=kwargs.get("tool_choice", "auto"))
        inv = self._invoke(agent, "on_reasoning", reasoning=args)
        return self.drive_events(inv, self._routes["on_reasoning"], kwargs, next_handler)

    def on_acting(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        args = _mw_pb2.ActingArgs(
            tool_call=c.tool_call_to_pb(kwargs["tool_call"]), tool=c.tool_spec(kwargs["tool"])
        )
        inv = self._invoke(agent, "on_acting", acting=args)
        return self.drive_events(inv, self._routes["on_acting"], kwargs, next_handler)

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
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
        return await self.drive_model_call(inv, self._routes["on_model_call"], kwargs, next_handler)

    async def on_check_permission(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        args = _mw_pb2.CheckPermissionArgs(
            tool_call=c.tool_call_to_pb(kwargs["tool_call"]), tool=c.tool_spec(kwargs["tool"])
        )
        inv = self._invoke(agent, "on_check_permission", check_permission=args)
        return await self.drive_permission(inv, self._routes["on_check_permission"], next_handler)

    async def on_compress_context(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> None:
        inv = self._invoke(
            agent, "on_compress_context", compress_context=_mw_pb2.CompressContextArgs()
        )
        await self.drive_compress(inv, self._routes["on_compress_context"], next_handler)

    # --- unary hooks -----------------------------------------------------------------------

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        request = _mw_pb2.TransformSystemPromptRequest(
            prompt=prompt,
            reply_id=agent.reply_id,
            agent_name=agent.name,
            state=c.struct(self.state(agent)),
            user_id=agent.user_id,
        )
        response = await self._unary_call(self.stub.TransformSystemPrompt, request)
        self.apply(agent, response.mutation)
        return response.prompt  # type: ignore[no-any-return]

    async def after_agent(self, agent: Agent, final: Message) -> None:
        request = _mw_pb2.AfterAgentRequest(
            reply_id=agent.reply_id,
            agent_name=agent.name,
            session_id=agent.session_id,
            user_id=agent.user_id,
            kind=c.KIND_TO_PB[agent.kind],
            final_message=message_to_proto(final),
            state=c.struct(self.state(agent)),
            context=[message_to_proto(m) for m in agent.state.context]
            if self.needs_context
            else [],
        )
        response = await self._unary_call(self.stub.AfterAgent, request)
        self.apply(agent, response.mutation)
