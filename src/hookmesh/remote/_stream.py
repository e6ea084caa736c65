"""The agent's end of the Intercept stream: one multiplexed call carrying every invocation of
one sidecar, each with its own inbox; under load queued messages go out folded together."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

import grpc

from hookmesh.remote._errors import SidecarError
from hookmesh.remote._mailbox import Mailbox
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc


class Waiting(Protocol):
    """An invocation as the stream sees it: an inbox, and what to do on done and failure."""

    inbox: Mailbox

    def ended(self) -> None: ...

    def fail(self, error: SidecarError) -> None: ...


class InterceptStream:
    """One long-lived Intercept call carrying every invocation, each with its own inbox."""

    def __init__(
        self,
        stub: _mw_grpc.MiddlewareServiceStub,
        metadata: Sequence[tuple[str, str]],
        max_message_bytes: int,
        broke: Callable[[], None],
    ) -> None:
        self._broke = broke
        self.retired = False
        """No new invocation goes on this stream (the connection changed): it half-closes
        once its open invocations end."""
        self._outgoing = Mailbox()
        """(request, foldable size) pairs for the request iterator; None ends it."""
        self.max_message_bytes = max_message_bytes
        self.invocations: dict[str, Waiting] = {}
        self._ids = itertools.count(1)
        self.alive = True
        self._aborted = False
        self._closing = False
        # NOTE(hookmesh): no wait_for_ready: while the sidecar is down every invocation fails
        # at once (and the failure mode decides) instead of waiting out its deadline.
        self._call = stub.Intercept(self._requests(), metadata=metadata)
        self._reader = asyncio.create_task(self._read())

    async def _requests(self) -> AsyncIterator[_mw_pb2.InterceptRequest]:
        queue = self._outgoing
        while (entry := await queue.get()) is not None:
            if not queue:
                yield entry[0]
                continue
            # NOTE(hookmesh): under load, what queued up while the last write was in flight
            # goes out together, read-only events of one invocation folded into one item
            # (one message instead of many; the order within each invocation is kept).
            batch: list[tuple[_mw_pb2.InterceptRequest, int] | None] = [entry]
            while queue:
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
        if not (self._aborted or self._closing or self.retired):
            self._broke()  # the connection went: the next invocation re-describes first
        # End the request iterator too: gRPC leaves its consumer task waiting for the next
        # request after the call fails, and a dropped stream would be collected mid-wait.
        self._outgoing.put_nowait(None)
        if not self._aborted:
            for inv in list(self.invocations.values()):
                inv.fail(error)

    def abort(self, error: SidecarError) -> None:
        """Give up on the sidecar: every open invocation fails with `error` now (instead of
        waiting out its deadline) and the call ends; the next invocation opens a new one."""
        self._aborted = True
        self.alive = False
        for inv in list(self.invocations.values()):
            inv.fail(error)
        self._outgoing.put_nowait(None)
        self._call.cancel()

    def retire(self) -> None:
        """Take no new invocation; half-close once the open ones ended (the sidecar answers
        those, then ends the stream)."""
        self.retired = True
        if not self.invocations:
            self.half_close()

    def half_close(self) -> None:
        self._outgoing.put_nowait(None)

    def next_id(self) -> str:
        return str(next(self._ids))

    def send(self, request: _mw_pb2.InterceptRequest, foldable: int = 0) -> None:
        """Queue `request`; a read-only item (`foldable`: its size in bytes) may be folded
        into the one before it."""
        self._outgoing.put_nowait((request, foldable))

    async def close(self) -> None:
        self._closing = True
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
