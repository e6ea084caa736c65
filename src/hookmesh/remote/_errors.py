"""The errors of the remote path: a sidecar that failed, and a middleware that failed in one."""

from __future__ import annotations

import grpc

from hookmesh.errors import HookmeshError


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
