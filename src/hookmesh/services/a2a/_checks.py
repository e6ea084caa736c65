"""Checks on A2A gRPC requests before the a2a-sdk sees them: the well-known types it trusts
(a Timestamp out of range, a NaN in a Struct) and enum numbers no value declares are the
caller's error, not an INTERNAL."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import message as _message
from google.protobuf import struct_pb2

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import timestamp_from_proto

_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"
_STRUCTS = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue")
_MAX_DURATION_SECONDS = 315_576_000_000
"""The Duration range protobuf documents (about 10,000 years)."""


def _number_problem(value: Any) -> str:
    """Why a Struct, Value or ListValue cannot be JSON ('' when it can): NaN or infinity."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, struct_pb2.Struct):
            stack.extend(node.fields.values())
        elif isinstance(node, struct_pb2.ListValue):
            stack.extend(node.values)
        else:
            arm = node.WhichOneof("kind")
            if arm == "number_value" and not math.isfinite(node.number_value):
                return "numbers must be finite: NaN and infinity are not JSON"
            if arm == "struct_value":
                stack.append(node.struct_value)
            elif arm == "list_value":
                stack.append(node.list_value)
    return ""


def _duration_problem(value: Any) -> str:
    seconds, nanos = value.seconds, value.nanos
    if abs(seconds) > _MAX_DURATION_SECONDS or abs(nanos) >= 1_000_000_000:
        return "must lie within ±10,000 years, with nanos from -999999999 to 999999999"
    if seconds and nanos and (seconds < 0) != (nanos < 0):
        return "seconds and nanos must have the same sign"
    return ""


def violations(message: _message.Message, path: str = "") -> list[FieldViolation]:
    """Every Timestamp, Duration, Struct, Value or ListValue set in `message` that the
    well-known types' own rules refuse, and every enum number its enum does not declare,
    by field path (``message.parts[2].metadata``)."""
    found: list[FieldViolation] = []
    stack: list[tuple[str, _message.Message]] = [(path, message)]
    while stack:
        where, node = stack.pop()
        name = node.DESCRIPTOR.full_name
        if name == _TIMESTAMP:
            try:
                timestamp_from_proto(node, where)  # type: ignore[arg-type]
            except SchemaError as exc:
                found.extend(exc.violations)
            continue
        if name == _DURATION:
            if problem := _duration_problem(node):
                found.append(FieldViolation(where, problem))
            continue
        if name in _STRUCTS:
            if problem := _number_problem(node):
                found.append(FieldViolation(where, problem))
            continue
        for field, value in node.ListFields():
            at = f"{where}.{field.name}" if where else field.name
            if field.enum_type is not None:
                found.extend(_enum_violations(field, value, at))
                continue
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry:
                if field.message_type.fields_by_name["value"].message_type is not None:
                    stack.extend((f"{at}[{key!r}]", item) for key, item in value.items())
            elif field.is_repeated:
                stack.extend((f"{at}[{i}]", item) for i, item in enumerate(value))
            else:
                stack.append((at, value))
    return found


def _enum_violations(field: Any, value: Any, at: str) -> list[FieldViolation]:
    """A number the field's enum does not declare (proto3 keeps unknown numbers; the SDK
    would fail on one)."""
    known = field.enum_type.values_by_number
    numbers = list(enumerate(value)) if field.is_repeated else [(None, value)]
    return [
        FieldViolation(
            at if i is None else f"{at}[{i}]",
            f"{number} is not a value of {field.enum_type.name}",
        )
        for i, number in numbers
        if number not in known
    ]


def _check(request: Any) -> None:
    if isinstance(request, _message.Message) and (found := violations(request)):
        raise SchemaError(found)


def _unary(behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        _check(request)
        return await behavior(request, context)

    return checked


def _server_stream(behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        _check(request)
        async for response in behavior(request, context):
            yield response

    return checked


class RequestChecks(grpc.aio.ServerInterceptor):
    """Refuses an A2A request holding a well-known value out of its range with
    INVALID_ARGUMENT (reason ``INVALID_SCHEMA``, one BadRequest naming each field); the
    server interceptor outside it turns the `SchemaError` into that status. A2A has no
    client-streaming RPC, so each request is one message."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        des, ser = handler.request_deserializer, handler.response_serializer
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_unary(handler.unary_unary), des, ser)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _server_stream(handler.unary_stream), des, ser
            )
        return handler
