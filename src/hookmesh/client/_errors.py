"""The error a client raises when a call fails."""

from __future__ import annotations

import grpc

from hookmesh.errors import FieldViolation, field_violations_of, reason_of, status_of


class AgentClientError(Exception):
    """A failed call: the gRPC code, the stable reason, and field violations for bad input.

    Branch on `reason` (e.g. ``SESSION_BUSY``), never on the message.

    A stream reset by a proxy (Envoy resets a call whose replica died after the response
    began: HTTP/2 RST_STREAM, which gRPC reports as INTERNAL with no status of the service's
    own) is reported as UNAVAILABLE with reason ``STREAM_RESET``, as the same failure is on
    a direct connection: hookmesh services never answer INTERNAL without an ErrorInfo.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        violations: list[FieldViolation] | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}" + (f" [{reason}]" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.violations = violations or []

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> AgentClientError:
        """Read code, message, reason and violations from a failed call."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        status = status_of(error)
        if status is None and code == grpc.StatusCode.INTERNAL and "RST_STREAM" in (details or ""):
            return cls(
                grpc.StatusCode.UNAVAILABLE,
                "the connection to the service broke during the call (a proxy reset the "
                "stream); the call may not have finished",
                "STREAM_RESET",
            )
        if status is None:
            return cls(code, details or "")
        return cls(
            code, status.message or details or "", reason_of(status), field_violations_of(status)
        )
