"""The agent's link to one sidecar: its channel, credentials and deadline, the Intercept
stream every invocation shares (reopened after a break), and unary calls with their errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import duration_pb2

from hookmesh.errors import metadata_of, reason_of, status_of
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._stream import InterceptStream
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

if TYPE_CHECKING:
    from hookmesh.middleware import Middleware

GRPC_DEFAULT_MESSAGE_BYTES = 4 * 1024 * 1024
"""A sidecar's receive limit when its Describe states none."""


class SidecarLink:
    """What every invocation of one remote middleware shares.

    Args:
        owner: The middleware this link serves (its errors are blamed on it).
        target: The sidecar's address.
        channel: The open channel to it.
        timeout: Seconds to wait for each sidecar message.
        token: Bearer token sent with every call (a secret: never logged).
    """

    def __init__(
        self,
        owner: Middleware,
        target: str,
        channel: grpc.aio.Channel,
        timeout: float,
        token: str | None,
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

    def stream(self) -> InterceptStream:
        """The shared Intercept stream, opened anew when the last one broke."""
        stream = self._stream
        if stream is None or not stream.alive:
            stream = self._stream = InterceptStream(
                self.stub, self.metadata, self.max_message_bytes
            )
        return stream

    async def unary(self, method: Callable[..., Any], request: Any) -> Any:
        """One unary call: ABORTED is the middleware's own error (its reason kept); any other
        failure is the sidecar's.

        Raises:
            RemoteHookError: The hook failed in the sidecar.
            SidecarError: SIDECAR_DEADLINE_EXCEEDED or SIDECAR_UNAVAILABLE.
        """
        try:
            return await method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.ABORTED:
                status = status_of(exc)
                raise RemoteHookError(
                    exc.details() or "the sidecar's hook failed",
                    reason=reason_of(status) if status is not None else "",
                    metadata=metadata_of(status) if status is not None else None,
                ) from None
            raise SidecarError(
                f"sidecar {self.target}: {exc.code().name}",
                reason="SIDECAR_DEADLINE_EXCEEDED"
                if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                else "SIDECAR_UNAVAILABLE",
                metadata={"grpcCode": exc.code().name},
            ) from None

    async def close(self) -> None:
        """Close the stream and the channel."""
        if self._stream is not None:
            await self._stream.close()
            self._stream = None
        await self.channel.close()
