"""RemoteMiddleware: a middleware whose hooks run in a sidecar, over one multiplexed stream."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from hookmesh._security import ClientTLS, open_channel
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    CompressArgs,
    CompressNext,
    FailureMode,
    Middleware,
    MiddlewareDescription,
    ModelCallArgs,
    ModelCallNext,
    PermissionArgs,
    PermissionDecision,
    PermissionNext,
    ReasoningArgs,
    ReasoningNext,
    ReplyArgs,
    ReplyNext,
    blame,
)
from hookmesh.models import ModelResult
from hookmesh.remote import _codec as c
from hookmesh.remote._breaker import BreakerSettings
from hookmesh.remote._changes import apply_mutation
from hookmesh.remote._drive_calls import drive_compress, drive_model_call, drive_permission
from hookmesh.remote._drive_events import drive_events
from hookmesh.remote._errors import SidecarError, protocol_error
from hookmesh.remote._invocation import invoke
from hookmesh.remote._link import GRPC_DEFAULT_MESSAGE_BYTES, SidecarLink
from hookmesh.remote._subscriptions import Routes
from hookmesh.remote._tools import tool_proxy
from hookmesh.schema import AgentEvent, Message, message_to_proto, output_to_proto
from hookmesh.tools import Tool
from hookmesh.v1 import middleware_pb2 as _mw_pb2

log = logging.getLogger("hookmesh.remote")

DEFAULT_TIMEOUT = 5.0
"""Seconds the agent waits for each sidecar message."""

# Reconnect quickly after a sidecar restart instead of gRPC's default 1 s → 120 s backoff:
# a reply waiting for the sidecar's return (within its message deadline) is not kept waiting
# by the back-off.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


class RemoteMiddleware(Middleware):
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
        breaker: When the sidecar's circuit opens (consecutive missed deadlines) and how it
            is probed; while it is open every call fails at once with
            ``SIDECAR_CIRCUIT_OPEN`` and the failure mode decides.
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
        breaker: BreakerSettings | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.failure_mode = failure_mode or "fail_closed"
        self.needs_context = False
        self.link = SidecarLink(self, target, channel, timeout, token, breaker or BreakerSettings())
        self._configured_mode = failure_mode
        self._description = MiddlewareDescription("", {}, self.failure_mode)
        self._routes: dict[str, Routes] = {}
        self._tools: list[Tool] = []
        self._described = asyncio.Event()
        self.description_hash = ""
        """Hex SHA-256 of the last DescribeResponse taken (status tells a new version)."""
        self._fresh = False
        """Whether the description is from the current connection (Describe once per
        connection: a sidecar restarted at the same address may be another middleware)."""
        self._refreshing: asyncio.Task[None] | None = None
        self._refused: SidecarError | None = None
        self._watching: asyncio.Task[None] | None = None
        self.link.ready = self._ready
        self.link.broke = self._stale
        if description is not None:
            self._adopt(description)
            self._fresh = True

    def _adopt(self, description: _mw_pb2.DescribeResponse) -> None:
        """Take the sidecar's description.

        Raises:
            SidecarError: SIDECAR_PROTOCOL_ERROR for an unknown version, hook or subscription.
        """
        if description.protocol_version != c.PROTOCOL_VERSION:
            raise protocol_error(
                f"sidecar {self.target} speaks protocol {description.protocol_version}, "
                f"not {c.PROTOCOL_VERSION}",
                protocolVersion=str(description.protocol_version),
            )
        try:
            described = c.description_from_pb(description)
        except ValueError as exc:
            raise protocol_error(f"sidecar {self.target}: {exc}") from None
        if self._configured_mode is not None:
            described = MiddlewareDescription(
                described.key,
                described.hooks,
                self._configured_mode,
                described.needs_context,
                tools=described.tools,
            )
        if self._described.is_set() and described != self._description:
            log.warning(
                "sidecar %s described itself anew (key %s, hooks %s): replies use it from now",
                self.target,
                described.key,
                ", ".join(described.hooks) or "none",
            )
        self._description = described
        self.description_hash = hashlib.sha256(
            description.SerializeToString(deterministic=True)
        ).hexdigest()
        self.needs_context = described.needs_context
        self.failure_mode = described.failure_mode
        self.link.max_message_bytes = description.max_message_bytes or GRPC_DEFAULT_MESSAGE_BYTES
        self._tools = [tool_proxy(self.link, spec) for spec in description.tools]
        self._routes = {hook: Routes.of(spec) for hook, spec in described.hooks.items()}
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
        breaker: BreakerSettings | None = None,
        wait: bool | None = None,
    ) -> RemoteMiddleware:
        """Connect to the sidecar at `target` and learn its hooks.

        Unless `wait` (default: unless ``fail_open``), a middleware whose sidecar does not
        answer is returned anyway, with a warning: it implements no hook until a background
        Describe succeeds.

        Raises:
            SidecarError: The sidecar did not answer Describe in time (unless ``fail_open``),
                or its description is invalid (unknown protocol version or subscription).
        """
        if wait is None:
            wait = failure_mode != "fail_open"
        channel = open_channel(target, tls, _CHANNEL_OPTIONS)
        mw = cls(
            target,
            None,
            channel,
            failure_mode=failure_mode,
            timeout=timeout,
            token=token,
            breaker=breaker,
        )
        try:
            # NOTE(hookmesh): fail_open does not wait for a sidecar that is down: the agent
            # starts without it and a background Describe picks it up.
            mw._adopt(await mw._describe(wait=wait))
            mw._fresh = True
        except grpc.aio.AioRpcError as exc:
            if wait:
                await channel.close()
                raise SidecarError(
                    f"sidecar {target} did not describe itself: {exc.code().name}",
                    reason="SIDECAR_UNAVAILABLE",
                    metadata={"grpcCode": exc.code().name},
                ) from None
            log.warning(
                "sidecar %s did not describe itself (%s): skipped until it does (%s)",
                target,
                exc.code().name,
                "fail_open" if failure_mode == "fail_open" else "not waited for",
            )
            mw._stale()
        except SidecarError:
            await channel.close()
            raise
        mw._watching = asyncio.create_task(mw._watch())
        return mw

    async def _describe(self, wait: bool = True) -> _mw_pb2.DescribeResponse:
        return await self.link.stub.Describe(  # type: ignore[no-any-return]
            _mw_pb2.DescribeRequest(protocol_version=c.PROTOCOL_VERSION),
            timeout=self.timeout,
            metadata=self.link.metadata,
            wait_for_ready=wait,
        )

    async def _watch(self) -> None:
        """Follow the channel: a connection that went (the sidecar died, restarted or is
        draining) makes the description stale, and a channel failing to connect means the
        sidecar is down (a fail_open one's tools are withdrawn meanwhile)."""
        channel = self.link.channel
        state = channel.get_state()
        while True:
            await channel.wait_for_state_change(state)
            new = channel.get_state()
            self.link.down = new == grpc.ChannelConnectivity.TRANSIENT_FAILURE
            if state == grpc.ChannelConnectivity.READY and new != state:
                self._stale()
            state = new

    def _stale(self) -> None:
        """The connection went: describe the sidecar again before the next call uses it (in
        the background now, so replies that start after it use the new description), and
        carry the invocations open on the old stream to their end."""
        self._fresh = False
        self.link.retire_stream()
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._redescribe())

    async def _redescribe(self) -> None:
        while True:
            try:
                description = await self._describe()
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    log.warning("sidecar %s: Describe failed: %s", self.target, exc.code().name)
                    await asyncio.sleep(min(self.timeout, 1.0))  # a back-off, not a sync
                continue
            try:
                self._adopt(description)
            except SidecarError as exc:
                log.error(
                    "sidecar %s is refused until it describes itself anew: %s", self.target, exc
                )
                self._refused = exc
                return
            self._refused = None
            self._fresh = True
            self.link.down = False
            return

    async def _ready(self) -> None:
        """Before a call: wait (within the message deadline) for the sidecar to describe
        itself on the current connection.

        Raises:
            SidecarError: SIDECAR_UNAVAILABLE when it did not in time; SIDECAR_PROTOCOL_ERROR
                when its new description is refused.
        """
        if self._fresh:
            return
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._redescribe())
        try:
            await asyncio.wait_for(asyncio.shield(self._refreshing), self.timeout)
        except TimeoutError:
            self.link.missed()
            raise SidecarError(
                f"the sidecar did not come back within {self.timeout:g} s",
                reason="SIDECAR_UNAVAILABLE",
                metadata={"timeoutSeconds": f"{self.timeout:g}"},
            ) from None
        if self._refused is not None:
            raise protocol_error(str(self._refused))

    async def _ready_or_skip(self, hook: str) -> bool:
        """`_ready`, blamed on this middleware; then whether it still implements `hook` (a
        sidecar replaced by another middleware may not: the call passes straight down)."""
        try:
            self.link.admit()
            await self._ready()
        except BaseException as exc:
            blame(exc, self)
            raise
        return hook in self._routes

    async def _events_when_ready(
        self, hook: str, agent: AgentView, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        if not await self._ready_or_skip(hook):
            async for event in next_handler():
                yield event
            return
        async for event in getattr(self, hook)(agent, kwargs, next_handler):
            yield event

    async def aclose(self) -> None:
        """Close the stream and the channel."""
        for task in (self._refreshing, self._watching):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.link.close()

    async def wait_ready(self, timeout: float) -> None:
        """Wait until the sidecar has described itself on the current connection."""
        async with asyncio.timeout(timeout):
            await self._described.wait()
            while not self._fresh:
                await self._ready()
            await self.link.channel.channel_ready()

    def middleware_key(self) -> str:
        return self._description.key

    def implements(self, hook: str) -> bool:
        return hook in self._description.hooks

    @property
    def described_now(self) -> bool:
        """Whether the sidecar described itself on its current connection."""
        return self._fresh

    @property
    def serving(self) -> bool:
        """Whether a call could go now: described on this connection, the channel not
        failing to connect, the circuit closed."""
        return self._fresh and not self._down() and not self.link.breaker.open

    def describe(self) -> MiddlewareDescription:
        """The description the sidecar gave (with the configured failure mode, if any)."""
        return self._description

    def list_tools(self) -> list[Tool]:
        """The sidecar's tools; none while a fail_open sidecar is down (its channel fails to
        connect or its circuit is open): the model is not offered what cannot run."""
        if self.failure_mode == "fail_open" and (self._down() or self.link.breaker.open):
            return []
        return list(self._tools)

    def _down(self) -> bool:
        """Whether the channel fails to connect. The watcher's flag lags the channel by a task
        switch (a call that just failed UNAVAILABLE left the channel failing already), so the
        channel is asked too."""
        state = self.link.channel.get_state()
        return self.link.down or state == grpc.ChannelConnectivity.TRANSIENT_FAILURE

    # --- onion hooks -----------------------------------------------------------------------

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        routes = self._routes.get("on_reply")
        if not self._fresh:
            return self._events_when_ready("on_reply", agent, kwargs, next_handler)
        if routes is None:
            return next_handler()
        args = _mw_pb2.ReplyArgs(
            inputs=[message_to_proto(m) for m in kwargs["inputs"]],
            resume=kwargs["resume"] is not None,
        )
        inv = invoke(self.link, agent, "on_reply", reply=args)
        return drive_events(inv, routes, kwargs, next_handler)

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        routes = self._routes.get("on_reasoning")
        if not self._fresh:
            return self._events_when_ready("on_reasoning", agent, kwargs, next_handler)
        if routes is None:
            return next_handler()
        args = _mw_pb2.ReasoningArgs(tool_choice=kwargs["tool_choice"])
        inv = invoke(self.link, agent, "on_reasoning", reasoning=args)
        return drive_events(inv, routes, kwargs, next_handler)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        routes = self._routes.get("on_acting")
        if not self._fresh:
            return self._events_when_ready("on_acting", agent, kwargs, next_handler)
        if routes is None:
            return next_handler()
        args = _mw_pb2.ActingArgs(
            tool_call=c.tool_call_to_pb(kwargs["tool_call"]), tool=c.tool_spec(kwargs["tool"])
        )
        inv = invoke(self.link, agent, "on_acting", acting=args)
        return drive_events(inv, routes, kwargs, next_handler)

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        if not self._fresh and not await self._ready_or_skip("on_model_call"):
            return await next_handler()  # type: ignore[no-any-return]
        routes = self._routes.get("on_model_call")
        if routes is None:
            return await next_handler()  # type: ignore[no-any-return]
        args = _mw_pb2.ModelCallArgs(
            model_name=kwargs["model"].model_name,
            provider_name=kwargs["model"].provider_name,
            messages=[message_to_proto(m) for m in kwargs["messages"]]
            if self.needs_context
            else [],
            tools=[c.tool_spec(t) for t in kwargs["tools"]],
            tool_choice=kwargs["tool_choice"],
        )
        inv = invoke(self.link, agent, "on_model_call", model_call=args)
        return await drive_model_call(inv, routes, kwargs, next_handler)

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        if not self._fresh and not await self._ready_or_skip("on_check_permission"):
            return await next_handler()  # type: ignore[no-any-return]
        routes = self._routes.get("on_check_permission")
        if routes is None:
            return await next_handler()  # type: ignore[no-any-return]
        args = _mw_pb2.CheckPermissionArgs(
            tool_call=c.tool_call_to_pb(kwargs["tool_call"]), tool=c.tool_spec(kwargs["tool"])
        )
        inv = invoke(self.link, agent, "on_check_permission", check_permission=args)
        return await drive_permission(inv, routes, next_handler)

    async def on_compress_context(
        self, agent: AgentView, kwargs: CompressArgs, next_handler: CompressNext
    ) -> None:
        if not self._fresh and not await self._ready_or_skip("on_compress_context"):
            return await next_handler()  # type: ignore[no-any-return]
        routes = self._routes.get("on_compress_context")
        if routes is None:
            return await next_handler()  # type: ignore[no-any-return]
        inv = invoke(
            self.link, agent, "on_compress_context", compress_context=_mw_pb2.CompressContextArgs()
        )
        await drive_compress(inv, routes, next_handler)

    # --- unary hooks -----------------------------------------------------------------------

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        request = _mw_pb2.TransformSystemPromptRequest(
            prompt=prompt,
            reply_id=agent.reply_id,
            agent_name=agent.name,
            state=c.struct(self.state(agent)),
            user_id=agent.user_id,
        )
        response = await self._unary(agent, self.link.stub.TransformSystemPrompt, request)
        return response.prompt  # type: ignore[no-any-return]

    async def after_agent(self, agent: AgentView, final: Message) -> None:
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
        if agent.output is not None:
            request.output.CopyFrom(output_to_proto(agent.output))
        await self._unary(agent, self.link.stub.AfterAgent, request)

    async def _unary(self, agent: AgentView, method: Callable[..., Any], request: Any) -> Any:
        """A unary hook call, its mutation applied; every failure is this middleware's."""
        try:
            response = await self.link.unary(method, request)
            apply_mutation(self, agent, response.mutation)
        except BaseException as exc:
            blame(exc, self)
            raise
        return response
