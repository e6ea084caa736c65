"""Errors map onto the gRPC rich error model: one ErrorInfo, plus BadRequest for schema errors."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from hookmesh.errors import (
    DOMAIN,
    FieldViolation,
    HookmeshError,
    SchemaError,
    field_violations_of,
    reason_of,
    to_grpc_status,
    to_status,
)

_VIOLATIONS = [
    FieldViolation("messages[0].flat.tool_call_id", "a tool message needs the tool_call_id"),
    FieldViolation("messages[2].agentic.blocks[1].tool_result", "tool results go in user messages"),
]


class _NotFoundError(HookmeshError):
    reason = "SESSION_NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND


def _details(
    status: status_pb2.Status,
) -> tuple[list[error_details_pb2.ErrorInfo], list[error_details_pb2.BadRequest]]:
    infos, bad_requests = [], []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            bad_requests.append(bad)
        else:
            raise AssertionError(f"unexpected detail {detail.type_url}")
    return infos, bad_requests


def test_schema_error_status() -> None:
    error = SchemaError(_VIOLATIONS)
    status = to_status(error)
    assert status.code == code_pb2.INVALID_ARGUMENT
    assert status.message == error.message
    assert status.message.startswith("messages[0].flat.tool_call_id: ")
    assert status.message.endswith("(and 1 more)")
    (info,), (bad,) = _details(status)
    assert info.reason == "INVALID_SCHEMA"
    assert info.domain == DOMAIN
    assert dict(info.metadata) == {
        "field": "messages[0].flat.tool_call_id",
        "violationCount": "2",
    }
    assert [(v.field, v.description) for v in bad.field_violations] == [
        (v.field, v.description) for v in _VIOLATIONS
    ]


def test_schema_error_read_back() -> None:
    status = to_status(SchemaError(_VIOLATIONS))
    assert reason_of(status) == "INVALID_SCHEMA"
    assert field_violations_of(status) == _VIOLATIONS


def test_single_violation() -> None:
    error = SchemaError.single("event", "an event needs one of its `event` arms set")
    assert error.violations == [
        FieldViolation("event", "an event needs one of its `event` arms set")
    ]
    assert error.message == "event: an event needs one of its `event` arms set"
    assert error.metadata == {"field": "event", "violationCount": "1"}
    assert str(error) == error.message
    assert field_violations_of(to_status(error)) == error.violations


def test_schema_error_is_a_value_error_and_needs_violations() -> None:
    assert isinstance(SchemaError.single("x", "y"), ValueError)
    with pytest.raises(ValueError, match="at least one violation"):
        SchemaError([])


def test_grpc_status_of_a_schema_error() -> None:
    grpc_status = to_grpc_status(SchemaError(_VIOLATIONS))
    assert isinstance(grpc_status, grpc.Status)
    assert grpc_status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert grpc_status.details == SchemaError(_VIOLATIONS).message
    # The rich status travels in the trailing metadata; a client decodes it from there.
    ((key, value),) = [
        (k, v) for k, v in grpc_status.trailing_metadata if k == "grpc-status-details-bin"
    ]
    assert key == "grpc-status-details-bin"
    status = status_pb2.Status.FromString(value)
    assert status == to_status(SchemaError(_VIOLATIONS))
    assert reason_of(status) == "INVALID_SCHEMA"
    assert field_violations_of(status) == _VIOLATIONS


def test_non_schema_error_has_no_bad_request() -> None:
    error = _NotFoundError("session s1 not found", metadata={"sessionId": "s1"})
    status = to_status(error)
    assert status.code == code_pb2.NOT_FOUND
    assert status.message == "session s1 not found"
    infos, bad_requests = _details(status)
    assert bad_requests == []
    (info,) = infos
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "SESSION_NOT_FOUND",
        DOMAIN,
        {"sessionId": "s1"},
    )
    assert reason_of(status) == "SESSION_NOT_FOUND"
    assert field_violations_of(status) == []
    assert to_grpc_status(error).code == grpc.StatusCode.NOT_FOUND


def test_base_error_defaults() -> None:
    error = HookmeshError("boom")
    assert (error.reason, error.code, error.metadata) == ("INTERNAL", grpc.StatusCode.INTERNAL, {})
    status = to_status(error)
    assert status.code == code_pb2.INTERNAL
    assert reason_of(status) == "INTERNAL"
    assert field_violations_of(status) == []


def test_readers_of_a_bare_status() -> None:
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message="?")
    assert reason_of(status) == ""
    assert field_violations_of(status) == []
    assert rpc_status.to_status(status).code == grpc.StatusCode.UNKNOWN
