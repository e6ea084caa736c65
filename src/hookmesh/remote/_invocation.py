"""The agent's side of the Intercept stream: one multiplexed call, one inbox per invocation."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc

from hookmesh.errors import HookmeshError
from hookmesh.schema import AgentEvent, event_from_proto, message_to_proto
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.agent import Agent
    from hookmesh.remote._proxy import RemoteMiddleware


class SidecarError(HookmeshError):
    """The sidecar failed, missed a deadline, broke the stream or broke the protocol.

    Reasons: ``SIDECAR_UNAVAILABLE`` (unreachable, or the stream broke),
    ``SIDECAR_DEADLINE_EXCEEDED`` (a message did not come in time) and
    ``SIDECAR_PROTOCOL_ERROR`` (a message the protocol does not allow there).
    """

    reason = "SIDECAR_FAILED"

    def __init__(
        self, message: str, *, reason: str | None = None, metadata: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, metadata=metadata)
        if reason is not None:
            self.reason = reason


def protocol_error(message: str, **metadata: str) -> SidecarError:
    """A sidecar message the protocol does not allow where it came."""
    return SidecarError(message, reason="SIDECAR_PROTOCOL_ERROR", metadata=metadata)


class RemoteHookError(HookmeshError):
    """The middleware failed in the sidecar (`done` with an error); keeps its reason."""

    reason = "MIDDLEWARE_FAILED"
    code = grpc.StatusCode.ABORTED

    def __init__(
        self, message: str, *, reason: str = "", metadata: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, metadata=metadata)
        if reason:
            self.reason = reason


class _Stream:
    """One long-lived Intercept call carrying every invocation, each with its own inbox."""

    def __init__(
        self,
        stub: _mw_grpc.MiddlewareServiceStub,
        metadata: Sequence[tuple[str, str]],
        max_message_bytes: int,
    ) -> None:
        self._outgoing: asyncio.Queue[tuple[_mw_pb2.InterceptRequest, int] | None] = asyncio.Queue()
        self.max_message_bytes = max_message_bytes
        self.invocations: dict[str, _Invocation] = {}
        self._ids = itertools.count(1)
        self.alive = True
        # NOTE(hookmesh): no wait_for_ready: while the sidecar is down every invocation fails
        # at once (and the failure mode decides) instead of waiting out its deadline.
        self._call = stub.Intercept(self._requests(), metadata=metadata)
        self._reader = asyncio.create_task(self._read())

    async def _requests(self) -> AsyncIterator[_mw_pb2.InterceptRequest]:
        queue = self._outgoing
        while (entry := await queue.get()) is not None:
            if queue.empty():
                yield entry[0]
                continue
            # NOTE(hookmesh): under load, what queued up while the last write was in flight
            # goes out together, read-only events of one invocation folded into one item
            # (one message instead of many; the order within each invocation is kept).
            batch: list[tuple[_mw_pb2.InterceptRequest, int] | None] = [entry]
            while not queue.empty():
                batch.append(queue.get_nowait())
            for request in coalesce(batch, self.max_message_bytes):
                yield request
            if batch[-1] is None:
                return

    async def _read(self) -> None:
        error: SidecarError
        try:
            async for response in self._call:
                inv = self.invocations.get(response.invocation_id)
                if inv is not None:
                    inv.inbox.put_nowait(response)
                    if response.WhichOneof("message") == "done":
                        inv.ended()
            error = SidecarError("the sidecar closed the stream", reason="SIDECAR_UNAVAILABLE")
        except grpc.aio.AioRpcError as exc:
            error = SidecarError(
                f"sidecar stream failed: {exc.code().name}",
                reason="SIDECAR_UNAVAILABLE",
                metadata={"grpcCode": exc.code().name},
            )
        except asyncio.CancelledError:
            error = SidecarError("the sidecar stream was closed", reason="SIDECAR_UNAVAILABLE")
        self.alive = False
        # End the request iterator too: gRPC leaves its consumer task waiting for the next
        # request after the call fails, and a dropped stream would be collected mid-wait.
        self._outgoing.put_nowait(None)
        for inv in list(self.invocations.values()):
            inv.fail(error)

    def next_id(self) -> str:
        return str(next(self._ids))

    def send(self, request: _mw_pb2.InterceptRequest, foldable: int = 0) -> None:
        """Queue `request`; a read-only item (`foldable`: its size in bytes) may be folded
        into the one before it."""
        self._outgoing.put_nowait((request, foldable))

    async def close(self) -> None:
        self._outgoing.put_nowait(None)
        self._call.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)


def coalesce(
    batch: list[tuple[_mw_pb2.InterceptRequest, int] | None], limit: int
) -> list[_mw_pb2.InterceptRequest]:
    """The requests of `batch` in order, each invocation's consecutive read-only items folded
    into as few messages as stay within `limit` bytes (a folded item adds at most its own
    size: the sidecar's limit holds for the folded message too)."""
    out: list[_mw_pb2.InterceptRequest] = []
    heads: dict[str, list[Any]] = {}
    for entry in batch:
        if entry is None:
            break
        request, size = entry
        invocation_id = request.invocation_id
        if not size:
            heads.pop(invocation_id, None)
        elif (head := heads.get(invocation_id)) is not None and head[1] + size <= limit:
            head[0].item.more_events.append(request.item.event)
            head[1] += size
            continue
        else:
            heads[invocation_id] = [request, size]
        out.append(request)
    return out


class DownstreamStopped(Exception):
    """The sidecar ended the hook while the downstream ran (a `done` nobody asked for, e.g.
    its deadline passed): the downstream is dropped and that `done` is the hook's answer."""


async def close_downstream(iterator: AsyncIterator[Any]) -> None:
    """Stop a downstream stream early (the tool run or model request behind it is cancelled)."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class _Invocation:
    """The agent's side of one hook invocation."""

    __slots__ = (
        "agent",
        "broken",
        "done_sent",
        "hook",
        "id",
        "inbox",
        "interrupted",
        "mw",
        "pulling",
        "stream",
        "task",
    )

    def __init__(self, mw: RemoteMiddleware, stream: _Stream, agent: Agent, hook: str) -> None:
        self.mw = mw
        self.stream = stream
        self.agent = agent
        self.hook = hook
        self.id = stream.next_id()
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.broken: SidecarError | None = None
        self.done_sent = False
        self.pulling = False
        self.interrupted = False
        self.task = asyncio.current_task()
        stream.invocations[self.id] = self

    def ended(self) -> None:
        """A `done` arrived. Answering a wait, `wait` takes it; sent unasked while the
        downstream runs, it stops the downstream wait (`pull` and `downstream` raise
        `DownstreamStopped`, now or at their next call)."""
        self.done_sent = True
        if self.pulling:
            self._cancel_wait("hookmesh: the sidecar ended the hook")

    def _cancel_wait(self, why: str) -> None:
        """Cancel the downstream wait once (`_woken` undoes the one cancellation)."""
        if self.task is not None and not self.interrupted:
            self.interrupted = True
            self.task.cancel(why)

    def fail(self, error: SidecarError) -> None:
        """The stream broke: wake any wait, and interrupt a fail_closed downstream wait."""
        self.broken = error
        self.inbox.put_nowait(error)
        if self.pulling and self.mw.failure_mode == "fail_closed":
            self._cancel_wait("hookmesh: the sidecar failed")

    async def pull(self, iterator: AsyncIterator[Any]) -> Any:
        """The downstream's next item. Under fail_closed a broken sidecar stream ends the
        wait at once (the reply need not run to its end to learn it failed); a `done` the
        sidecar sends meanwhile ends it with `DownstreamStopped`."""
        self._check_waiting()
        self.pulling = True
        try:
            return await anext(iterator)
        except asyncio.CancelledError:
            if (woken := self._woken()) is None:
                raise
            raise woken from None
        finally:
            self.pulling = False

    async def downstream(self, start: Callable[[], Awaitable[Any]]) -> Any:
        """`pull` for a downstream that is one awaitable (a model call), started here once
        the checks passed."""
        self._check_waiting()
        self.pulling = True
        try:
            return await start()
        except asyncio.CancelledError:
            if (woken := self._woken()) is None:
                raise
            raise woken from None
        finally:
            self.pulling = False

    def _check_waiting(self) -> None:
        """Before the downstream runs on: a broken stream (fail_closed), or a `done` the
        sidecar sent while the agent was busy upstream. (Emits may come unasked too: they
        wait in the inbox for the next answer.)"""
        if self.broken is not None and self.mw.failure_mode == "fail_closed":
            raise self.broken
        if self.done_sent:
            raise DownstreamStopped

    def _woken(self) -> Exception | None:
        """Why this invocation cancelled the downstream wait: the stream broke, or the
        sidecar ended the hook. None when the cancellation is someone else's (the reply's
        interrupt, an outer deadline), also when it came beside this one: it goes on."""
        if not self.interrupted:
            return None
        self.interrupted = False
        if self.task is not None and self.task.uncancel() > 0:
            return None
        return self.broken if self.broken is not None else DownstreamStopped()

    def send(self, **message: Any) -> None:
        self.queue(_mw_pb2.InterceptRequest(invocation_id=self.id, **message))

    def queue(self, request: _mw_pb2.InterceptRequest, read_only: bool = False) -> None:
        """Queue `request` for the shared stream, unless the sidecar could not take it: a
        message over its limit would break the stream for every reply, so only this
        invocation fails."""
        size = request.ByteSize()
        if size > self.mw.max_message_bytes:
            raise SidecarError(
                f"an invocation message of {size} bytes exceeds the sidecar's limit of "
                f"{self.mw.max_message_bytes}",
                reason="INVOCATION_TOO_LARGE",
                metadata={"bytes": str(size), "limit": str(self.mw.max_message_bytes)},
            )
        self.stream.send(request, size if read_only else 0)

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

    def item(self, state: bool, **item: Any) -> None:
        """Send a downstream item, with the state slice as it is now when `state` (an item
        awaiting a verdict); one without may be coalesced with the next."""
        request = _mw_pb2.InterceptRequest(invocation_id=self.id)
        pb = request.item
        if state:
            self.fill_state(pb)
        for arm, value in item.items():
            getattr(pb, arm).CopyFrom(value)
        self.queue(request, read_only=not state and "event" in item)

    def outcome(self, **result: Any) -> None:
        request = _mw_pb2.InterceptRequest(invocation_id=self.id)
        outcome = request.outcome
        self.fill_state(outcome)
        if self.mw.needs_context:
            outcome.context.extend(self.context())
        for arm, value in result.items():
            getattr(outcome, arm).MergeFrom(value)
        self.queue(request)

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
                    reason="SIDECAR_DEADLINE_EXCEEDED",
                    metadata={"hook": self.hook, "timeoutSeconds": f"{timeout:g}"},
                ) from None
            if isinstance(message, SidecarError):
                raise message
            arm = message.WhichOneof("message")
            if arm == "emit":
                events.append(self._emitted(message.emit))
            elif arm == "mutate":
                self.mw.apply(self.agent, message.mutate)
            elif arm == "done" and message.done.WhichOneof("result") == "error" and not failed:
                error = message.done.error
                raise RemoteHookError(
                    error.message or "the sidecar's hook failed",
                    reason=error.reason,
                    metadata=dict(error.metadata),
                )
            elif arm in expected or arm == "done":
                return events, message
            else:
                raise protocol_error(
                    f"sidecar sent {arm or 'an empty message'} where "
                    f"{' or '.join(expected)} was due in {self.hook}",
                    hook=self.hook,
                    sent=arm or "",
                )

    def _emitted(self, pb: Any) -> AgentEvent:
        reply_id = self.agent.reply_id
        if not pb.reply_id:
            pb.reply_id = reply_id
        elif pb.reply_id != reply_id:
            raise protocol_error(
                f"sidecar emitted an event for another reply in {self.hook}", hook=self.hook
            )
        return event_from_proto(pb)

    def close(self, cancel: bool) -> None:
        if cancel and self.stream.alive:
            self.send(cancel=_mw_pb2.CancelInvocation())
        self.stream.invocations.pop(self.id, None)
