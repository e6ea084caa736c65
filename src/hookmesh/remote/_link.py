"""The agent's link to one sidecar: its channel, credentials and deadline, the Intercept
stream every invocation shares (reopened after a break), unary calls with their errors, and
the circuit breaker every call passes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import duration_pb2

from hookmesh.errors import metadata_of, reason_of, status_of
from hookmesh.metrics import record_circuit, record_circuit_rejection
from hookmesh.remote import _codec as c
from hookmesh.remote._breaker import BreakerSettings, CircuitBreaker
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._stream import InterceptStream
from hookmesh.server import report_component
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.middleware import Middleware

GRPC_DEFAULT_MESSAGE_BYTES = 4 * 1024 * 1024
"""A sidecar's receive limit when its Describe states none."""


async def _nothing() -> None:
    return None


def _none() -> None:
    return None


class SidecarLink:
    """What every invocation of one remote middleware shares.

    Args:
        owner: The middleware this link serves (its errors are blamed on it).
        target: The sidecar's address.
        channel: The open channel to it.
        timeout: Seconds to wait for each sidecar message.
        token: Bearer token sent with every call (a secret: never logged).
        breaker: When the circuit opens and how it is probed.
    """

    def __init__(
        self,
        owner: Middleware,
        target: str,
        channel: grpc.aio.Channel,
        timeout: float,
        token: str | None,
        breaker: BreakerSettings,
    ) -> None:
        self.owner = owner
        self.target = target
        self.channel = channel
        self.timeout = timeout
        self.stub = _mw_grpc.MiddlewareServiceStub(channel)
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self.timeout_pb = duration_pb2.Duration()
        self.timeout_pb.FromNanoseconds(int(timeout * 1e9))
        self.max_message_bytes = GRPC_DEFAULT_MESSAGE_BYTES
        self._stream: InterceptStream | None = None
        self._retired: list[InterceptStream] = []
        self.ready: Callable[[], Awaitable[None]] = _nothing
        """Awaited before every call: the owner re-describes the sidecar after a reconnect."""
        self.down = False
        """Whether the channel fails to connect (the sidecar is down)."""
        self.broke: Callable[[], None] = _none
        """Called when the connection went (a stream broke)."""
        self.calls = 0
        """Calls admitted (hook invocations, unary hooks, tool calls): 0 is never invoked."""
        self.last_error = ""
        """The last failure of a call to the sidecar (reason and message), for status."""
        self.last_error_time: float | None = None
        """When it happened (time.time())."""
        self.component = f"sidecar:{target}"
        """The name the process's health services answer this sidecar's circuit under."""
        self.breaker = CircuitBreaker(target, self._probe, breaker, self._circuit_changed)
        report_component(self.component, self, True)

    def admit(self) -> None:
        """Before a call: refuse it at once while the circuit is open.

        Raises:
            SidecarError: ``SIDECAR_CIRCUIT_OPEN``.
        """
        self.calls += 1
        try:
            self.breaker.check()
        except SidecarError as exc:
            record_circuit_rejection(self.target, self.owner.middleware_key())
            self.failed(exc)
            raise

    def failed(self, error: SidecarError | RemoteHookError) -> None:
        """Note a call's failure for status (`last_error`)."""
        self.last_error = f"{error.reason}: {error}"
        self.last_error_time = time.time()

    def heard(self) -> None:
        """A message came from the sidecar in time."""
        self.breaker.heard()

    def missed(self) -> None:
        """A message deadline passed; when that opens the circuit, every invocation still
        waiting on the shared stream fails now rather than at its own deadline."""
        self.last_error = "SIDECAR_DEADLINE_EXCEEDED: a message deadline passed"
        self.last_error_time = time.time()
        if self.breaker.missed() and self._stream is not None:
            self._stream.abort(self.breaker.refusal())
            self._stream = None

    async def _probe(self) -> None:
        await self.stub.Describe(
            _mw_pb2.DescribeRequest(protocol_version=c.PROTOCOL_VERSION),
            timeout=self.timeout,
            metadata=self.metadata,
        )

    def _circuit_changed(self, opened: bool) -> None:
        record_circuit(self.target, opened)
        report_component(self.component, self, not opened)

    def stream(self) -> InterceptStream:
        """The shared Intercept stream, opened anew when the last one broke or retired."""
        stream = self._stream
        if stream is None or not stream.alive:
            stream = self._stream = InterceptStream(
                self.stub, self.metadata, self.max_message_bytes, lambda: self.broke()
            )
        return stream

    def retire_stream(self) -> None:
        """The connection changed: new invocations go on a new stream; the current one
        carries its open invocations to their end, then half-closes."""
        stream, self._stream = self._stream, None
        if stream is not None and stream.alive:
            self._retired = [s for s in self._retired if s.alive]
            self._retired.append(stream)
            stream.retire()

    async def unary(self, method: Callable[..., Any], request: Any) -> Any:
        """One unary call: ABORTED is the middleware's own error (its reason kept); any other
        failure is the sidecar's.

        Raises:
            RemoteHookError: The hook failed in the sidecar.
            SidecarError: SIDECAR_DEADLINE_EXCEEDED, SIDECAR_UNAVAILABLE or
                SIDECAR_CIRCUIT_OPEN.
        """
        self.admit()
        await self.ready()
        try:
            response = await method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                self.missed()
            else:
                self.heard()
            error: SidecarError | RemoteHookError
            if exc.code() == grpc.StatusCode.ABORTED:
                status = status_of(exc)
                error = RemoteHookError(
                    exc.details() or "the sidecar's hook failed",
                    reason=reason_of(status) if status is not None else "",
                    metadata=metadata_of(status) if status is not None else None,
                )
            else:
                error = SidecarError(
                    f"the sidecar failed: {exc.code().name}",
                    reason="SIDECAR_DEADLINE_EXCEEDED"
                    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                    else "SIDECAR_UNAVAILABLE",
                    metadata={"grpcCode": exc.code().name},
                )
            self.failed(error)
            raise error from None
        self.heard()
        return response

    async def close(self) -> None:
        """Stop probing, close the stream and the channel."""
        await self.breaker.aclose()
        report_component(self.component, self, None)
        for stream in [*self._retired, *([self._stream] if self._stream else [])]:
            await stream.close()
        self._stream = None
        self._retired = []
        await self.channel.close()
