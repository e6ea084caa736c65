"""Errors with a stable reason, and their mapping to the gRPC rich error model."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "hookmesh.dev"
"""`ErrorInfo.domain` of every hookmesh error."""

_MAX_MESSAGE = 1000
_MAX_VALUE = 200
"""Longest error message and metadata / field text sent (the rest is cut): a status travels
in trailers, whose size gRPC limits (8 KiB by default), and a request's own bad input must
not be echoed back whole."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One problem with one field of a request."""

    field: str
    """Path of the field, proto style: ``messages[0].agentic.blocks[2].tool_result``."""
    description: str
    """What is wrong, and what would be right."""


class HookmeshError(Exception):
    """An error with a stable UPPER_SNAKE reason that clients may branch on."""

    reason: str = "INTERNAL"
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    source: str = "agent"
    """What failed, for reply_end errors: ``agent``, ``model``, ``tool:<name>``..."""
    reported = False
    """Whether the failure was already logged where it is known (a sidecar's circuit opening
    warns once): a fail_open skip of it is then logged at DEBUG, not once per reply."""

    def __init__(self, message: str, *, metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata or {}


class SchemaError(HookmeshError, ValueError):
    """Input that does not satisfy the hookmesh schema; lists every violation found."""

    reason = "INVALID_SCHEMA"
    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, violations: list[FieldViolation], *, reason: str | None = None) -> None:
        if not violations:
            raise ValueError("SchemaError needs at least one violation")
        first = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        super().__init__(
            f"{first.field}: {first.description}{more}",
            metadata={"field": first.field, "violationCount": str(len(violations))},
        )
        self.violations = violations
        if reason is not None:
            self.reason = reason

    @classmethod
    def single(cls, field: str, description: str, *, reason: str | None = None) -> SchemaError:
        """One violation."""
        return cls([FieldViolation(field, description)], reason=reason)


class RequestError(HookmeshError):
    """A request the service refuses, with its own status code and stable reason."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        *,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, metadata=metadata)
        self.code = code
        self.reason = reason


def to_status(error: HookmeshError) -> status_pb2.Status:
    """The `google.rpc.Status` for `error`: one ErrorInfo, plus BadRequest for schema errors."""
    info = any_pb2.Any()
    metadata = {k[:_MAX_VALUE]: _clip(v, _MAX_VALUE) for k, v in error.metadata.items()}
    info.Pack(error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=metadata))
    details = [info]
    if isinstance(error, SchemaError):
        bad = any_pb2.Any()
        bad.Pack(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=_clip(v.field, _MAX_VALUE), description=_clip(v.description, 500)
                    )
                    for v in error.violations[:100]
                ]
            )
        )
        details.append(bad)
    return status_pb2.Status(
        code=getattr(code_pb2, error.code.name),
        message=_clip(error.message, _MAX_MESSAGE),
        details=details,
    )


def to_grpc_status(error: HookmeshError) -> grpc.Status:
    """The status to pass to `context.abort_with_status`."""
    return rpc_status.to_status(to_status(error))


def reason_of(status: status_pb2.Status) -> str:
    """The ErrorInfo reason in `status`, or '' when it carries none."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return ""


def metadata_of(status: status_pb2.Status) -> dict[str, str]:
    """The ErrorInfo metadata in `status` (empty when it carries none)."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return dict(info.metadata)
    return {}


def field_violations_of(status: status_pb2.Status) -> list[FieldViolation]:
    """The BadRequest field violations in `status` (empty when there are none)."""
    out: list[FieldViolation] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return out


def status_of(error: grpc.RpcError) -> status_pb2.Status | None:
    """The rich status a failed call carries (from its trailers), or None."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
            return status_pb2.Status.FromString(value)  # type: ignore[arg-type]
    return None
