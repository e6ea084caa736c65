"""The one server interceptor of every hookmesh server: request id, caller, trace span, a
`HookmeshError` turned into its rich status, and unhandled errors into INTERNAL with the
request id (details stay in the log)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from hookmesh.errors import HookmeshError, RequestError, to_grpc_status
from hookmesh.server._auth import Authenticator, caller_var

log = logging.getLogger("hookmesh.server")

REQUEST_ID_HEADER = "x-request-id"
"""Metadata key of a caller-chosen request id (kept when well formed, else one is made)."""
request_id_var: ContextVar[str] = ContextVar("hookmesh_request_id", default="")
"""The id of the RPC this task serves, in every log line it writes."""

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_tracer = trace.get_tracer("hookmesh.server")


def _request_id(metadata: Sequence[tuple[str, Any]]) -> str:
    for key, value in metadata:
        if key == REQUEST_ID_HEADER and isinstance(value, str) and _REQUEST_ID.fullmatch(value):
            return value
    return os.urandom(8).hex()


class ServerCallInterceptor(grpc.aio.ServerInterceptor):
    """Per call, before the servicer runs: a request id, the caller (refused with
    UNAUTHENTICATED / PERMISSION_DENIED and ErrorInfo when credentials are missing or
    wrong), a SERVER span joined to the caller's trace, all in contextvars.

    After it, whatever escapes the servicer ends the call: a `HookmeshError` with its own
    status (`to_grpc_status`: its code, one ErrorInfo, a BadRequest for a `SchemaError`),
    also after a stream has sent responses; anything else with INTERNAL and the request
    id. A servicer method is therefore only its happy path: it raises, never maps errors.

    NOTE(hookmesh): the span's context is attached in the RPC's own task and never detached:
    the task ends with the call, and detaching from an async generator that the loop closes
    in another task is what makes OpenTelemetry's stock interceptor log "Failed to detach
    context" on every cancelled stream. The span ends in a `finally`, safe in any task.

    Args:
        authenticator: Checks credentials; every caller is ``anonymous`` when None.
        open_services: Full service names answered without credentials, untraced.
    """

    def __init__(self, authenticator: Authenticator | None, open_services: Sequence[str]) -> None:
        self._auth = authenticator
        self._open = tuple(f"/{name}/" for name in open_services)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method  # type: ignore[attr-defined]
        if handler is None or method.startswith(self._open):
            return handler
        service, _, name = method.lstrip("/").partition("/")
        return _wrap(handler, _Call(self._auth, method, service, name))


class _Call:
    """What the wrappers of one method share."""

    __slots__ = ("attributes", "auth", "method")

    def __init__(self, auth: Authenticator | None, method: str, service: str, name: str) -> None:
        self.auth = auth
        self.method = method
        self.attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

    def begin(self, context: grpc.aio.ServicerContext) -> tuple[trace.Span, RequestError | None]:
        """Set the call's contextvars and start its span; the error refuses the call."""
        metadata = tuple(context.invocation_metadata() or ())
        request_id = _request_id(metadata)
        request_id_var.set(request_id)
        parent = propagate.extract({k: v for k, v in metadata if isinstance(v, str)})
        span = _tracer.start_span(
            self.method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=self.attributes,
        )
        span.set_attribute("hookmesh.request_id", request_id)
        otel_context.attach(trace.set_span_in_context(span, parent))
        refused = None
        if self.auth is not None:
            try:
                caller_var.set(self.auth.authenticate(metadata, context))
            except RequestError as exc:
                refused = exc
        return span, refused

    async def refuse(self, context: grpc.aio.ServicerContext, exc: RequestError) -> None:
        log.info("refused %s: %s (%s)", self.method, exc.reason, exc.message)
        await context.abort_with_status(to_grpc_status(exc))

    async def internal(self, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        request_id = request_id_var.get()
        log.error("unhandled error in %s", self.method, exc_info=exc)
        error = RequestError(
            grpc.StatusCode.INTERNAL,
            "INTERNAL",
            f"internal error; the service log has the details under request id {request_id}",
            metadata={"requestId": request_id},
        )
        await context.abort_with_status(to_grpc_status(error))


class _Undecodable:
    """A request message that did not parse; the wrapper refuses it with INVALID_ARGUMENT."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserializer` returning `_Undecodable` instead of raising (grpc would answer
    INTERNAL naming the exception class)."""
    if deserializer is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:
            return _Undecodable(exc)

    return decode


def _undecodable(method: str) -> RequestError:
    return RequestError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNDECODABLE_REQUEST",
        f"the request message of {method} is not valid protobuf wire data",
    )


async def _checked(requests: AsyncIterator[Any], method: str) -> AsyncIterator[Any]:
    async for request in requests:
        if type(request) is _Undecodable:
            raise _Refusal(_undecodable(method))
        yield request


class _Refusal(Exception):
    """Raised from a request iterator; the wrapper turns it into its error status."""

    def __init__(self, error: RequestError) -> None:
        super().__init__(error.message)
        self.error = error


def _end(span: trace.Span, context: grpc.aio.ServicerContext) -> None:
    code = context.code()
    value = code.value[0] if isinstance(code, grpc.StatusCode) else 0
    span.set_attribute("rpc.grpc.status_code", value)
    if value not in (0, 1):  # OK, CANCELLED
        span.set_status(Status(StatusCode.ERROR))
    span.end()


def _request(request: Any, streaming: bool, call: _Call) -> Any:
    """The request to hand the servicer: checked as it streams, refused if undecodable."""
    if streaming:
        return _checked(request, call.method)
    if type(request) is _Undecodable:
        raise _Refusal(_undecodable(call.method))
    return request


def _unary(behavior: Callable[..., Any], call: _Call, streaming: bool) -> Callable[..., Any]:
    async def wrapper(request: Any, context: grpc.aio.ServicerContext) -> Any:
        span, refused = call.begin(context)
        try:
            if refused is not None:
                await call.refuse(context, refused)
            try:
                return await behavior(_request(request, streaming, call), context)
            except grpc.aio.AbortError:
                raise
            except _Refusal as exc:
                await call.refuse(context, exc.error)
            except HookmeshError as exc:
                await context.abort_with_status(to_grpc_status(exc))
            except Exception as exc:
                await call.internal(context, exc)
        finally:
            _end(span, context)

    return wrapper


def _streaming(behavior: Callable[..., Any], call: _Call, streaming: bool) -> Callable[..., Any]:
    async def wrapper(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        span, refused = call.begin(context)
        try:
            if refused is not None:
                await call.refuse(context, refused)
            try:
                async for response in behavior(_request(request, streaming, call), context):
                    yield response
            except grpc.aio.AbortError:
                raise
            except _Refusal as exc:
                await call.refuse(context, exc.error)
            except HookmeshError as exc:
                await context.abort_with_status(to_grpc_status(exc))
            except Exception as exc:
                await call.internal(context, exc)
        finally:
            _end(span, context)

    return wrapper


def _wrap(handler: grpc.RpcMethodHandler, call: _Call) -> grpc.RpcMethodHandler:
    des, ser = _lenient(handler.request_deserializer), handler.response_serializer
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, call, False), des, ser
        )
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(
            _unary(handler.stream_unary, call, True), des, ser
        )
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            _streaming(handler.unary_stream, call, False), des, ser
        )
    return grpc.stream_stream_rpc_method_handler(
        _streaming(handler.stream_stream, call, True), des, ser
    )
