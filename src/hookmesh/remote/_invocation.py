"""The agent's side of the Intercept stream: one multiplexed call, one inbox per invocation."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from hookmesh.errors import HookmeshError
from hookmesh.remote import _codec as c
from hookmesh.schema import (
    AgentEvent,
    event_from_proto,
    message_to_proto,
)
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.agent import Agent
    from hookmesh.remote._proxy import RemoteMiddleware


class SidecarError(HookmeshError):
    """The sidecar failed, missed a deadline, broke the stream or broke the protocol."""

    reason = "SIDECAR_FAILED"


class RemoteHookError(HookmeshError):
    """The middleware's code raised in the sidecar."""

    reason = "MIDDLEWARE_FAILED"
    code = grpc.StatusCode.ABORTED


@dataclass(frozen=True, slots=True)
class _HookSpec:
    mode: str
    everything: bool
    wanted: frozenset[str]

    def wants(self, item: str) -> bool:
        return self.everything or item in self.wanted


class _Stream:
    """One long-lived Intercept call carrying every invocation, each with its own inbox."""

    def __init__(
        self, stub: _mw_grpc.MiddlewareServiceStub, metadata: Sequence[tuple[str, str]]
    ) -> None:
        self._outgoing: asyncio.Queue[_mw_pb2.InterceptRequest | None] = asyncio.Queue()
        self.inboxes: dict[str, asyncio.Queue[Any]] = {}
        self._ids = itertools.count(1)
        self.alive = True
        # NOTE(hookmesh): no wait_for_ready: while the sidecar is down every invocation fails
        # at once (and the failure mode decides) instead of waiting out its deadline.
        self._call = stub.Intercept(self._requests(), metadata=metadata)
        self._reader = asyncio.create_task(self._read())

    async def _requests(self) -> AsyncIterator[_mw_pb2.InterceptRequest]:
        while (request := await self._outgoing.get()) is not None:
            yield request

    async def _read(self) -> None:
        error: SidecarError
        try:
            async for response in self._call:
                inbox = self.inboxes.get(response.invocation_id)
                if inbox is not None:
                    inbox.put_nowait(response)
            error = SidecarError("the sidecar closed the stream")
        except grpc.aio.AioRpcError as exc:
            error = SidecarError(f"sidecar stream failed: {exc.code().name}: {exc.details()}")
        except asyncio.CancelledError:
            error = SidecarError("the sidecar stream was closed")
        self.alive = False
        for inbox in self.inboxes.values():
            inbox.put_nowait(error)

    def open(self) -> str:
        invocation_id = str(next(self._ids))
        self.inboxes[invocation_id] = asyncio.Queue()
        return invocation_id

    def send(self, request: _mw_pb2.InterceptRequest) -> None:
        self._outgoing.put_nowait(request)

    async def close(self) -> None:
        self._outgoing.put_nowait(None)
        self._call.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)


class _Invocation:
    """The agent's side of one hook invocation."""

    __slots__ = ("agent", "hook", "id", "inbox", "mw", "stream")

    def __init__(self, mw: RemoteMiddleware, stream: _Stream, agent: Agent, hook: str) -> None:
        self.mw = mw
        self.stream = stream
        self.agent = agent
        self.hook = hook
        self.id = stream.open()
        self.inbox = stream.inboxes[self.id]

    def send(self, **message: Any) -> None:
        self.stream.send(_mw_pb2.InterceptRequest(invocation_id=self.id, **message))

    def state(self) -> Any:
        return c.struct(self.mw.state(self.agent))

    def fill_state(self, message: Any) -> None:
        """Set `message.state` to the middleware's slice, when it has one."""
        by_reply = self.agent.state.middle_context.get(self.mw.middleware_key())
        slice_ = by_reply.get(self.agent.reply_id) if by_reply else None
        if slice_:
            message.state.update(slice_)

    def context(self) -> list[Any]:
        if not self.mw.needs_context:
            return []
        return [message_to_proto(m) for m in self.agent.state.context]

    def outcome(self, **result: Any) -> None:
        request = _mw_pb2.InterceptRequest(invocation_id=self.id)
        outcome = request.outcome
        self.fill_state(outcome)
        if self.mw.needs_context:
            outcome.context.extend(self.context())
        for arm, value in result.items():
            getattr(outcome, arm).MergeFrom(value)
        self.stream.send(request)

    async def wait(self, *expected: str, failed: bool = False) -> tuple[list[AgentEvent], Any]:
        """Apply mutations and collect emits until one of `expected` arrives (or done).

        `failed`: the downstream failed, so a done carrying that error is no hook failure
        (the agent re-raises the downstream's own exception).
        """
        events: list[AgentEvent] = []
        timeout = self.mw.timeout
        while True:
            try:
                async with asyncio.timeout(timeout):
                    message = await self.inbox.get()
            except TimeoutError:
                raise SidecarError(
                    f"sidecar {self.mw.target} sent nothing for {timeout:g} s in {self.hook}",
                    metadata={"hook": self.hook, "timeoutSeconds": f"{timeout:g}"},
                ) from None
            if isinstance(message, SidecarError):
                raise message
            arm = message.WhichOneof("message")
            if arm == "emit":
                events.append(event_from_proto(message.emit))
            elif arm == "mutate":
                self.mw._apply(self.agent, message.mutate, self.hook)
            elif arm == "done" and message.done.WhichOneof("result") == "error" and not failed:
                error = message.done.error
                raise RemoteHookError(error.message, metadata=dict(error.metadata))
            elif arm in expected or arm == "done":
                return events, message
            else:
                raise SidecarError(f"sidecar sent {arm} where {' or '.join(expected)} was due")

    def close(self, cancel: bool) -> None:
        if cancel and self.stream.alive:
            self.send(cancel=_mw_pb2.CancelInvocation())
        self.stream.inboxes.pop(self.id, None)
