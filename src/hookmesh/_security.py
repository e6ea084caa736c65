"""Channel security for sidecars: TLS / mTLS credentials and a bearer-token check."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

_OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/")


def _read(value: bytes | str | Path | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


@dataclass(frozen=True)
class ClientTLS:
    """How the agent verifies a sidecar, and (for mTLS) proves who it is.

    Each field takes PEM bytes or a file path.
    """

    ca_cert: bytes | str | Path | None = None
    """Root certificates to trust; the system's when None."""
    client_cert: bytes | str | Path | None = None
    """The agent's certificate chain, for mTLS."""
    client_key: bytes | str | Path | None = None
    """The agent's private key, for mTLS (a secret)."""
    server_name: str = ""
    """Expected name in the sidecar's certificate when it differs from the target host."""


@dataclass(frozen=True)
class ServerTLS:
    """The sidecar's certificate, and (for mTLS) the CA its clients must present."""

    cert: bytes | str | Path
    """The sidecar's certificate chain (PEM bytes or path)."""
    key: bytes | str | Path
    """The sidecar's private key (PEM bytes or path; a secret)."""
    client_ca: bytes | str | Path | None = None
    """When set, clients must present a certificate signed by this CA (mTLS)."""


def channel_credentials(tls: ClientTLS) -> tuple[grpc.ChannelCredentials, list[tuple[str, Any]]]:
    """Credentials and channel options for `tls`."""
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_cert),
        private_key=_read(tls.client_key),
        certificate_chain=_read(tls.client_cert),
    )
    options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
    return creds, options


def open_channel(
    target: str, tls: ClientTLS | None = None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to `target`, TLS when `tls` is given, carrying trace context."""
    interceptors = aio_client_interceptors()
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=interceptors)
    creds, tls_options = channel_credentials(tls)
    return grpc.aio.secure_channel(
        target, creds, options=[*options, *tls_options], interceptors=interceptors
    )


def server_credentials(tls: ServerTLS) -> grpc.ServerCredentials:
    """Server credentials for `tls`; mTLS when a client CA is given."""
    key, cert = _read(tls.key), _read(tls.cert)
    assert key is not None and cert is not None
    client_ca = _read(tls.client_ca)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without ``authorization: Bearer <token>`` (health and reflection stay open)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_OPEN_SERVICES):
            return handler
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
                if hmac.compare_digest(given, self._expected):
                    return handler
        return _rejecting(handler)


def _rejecting(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    async def abort(unused_request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")

    async def abort_stream(unused_request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")
        yield  # pragma: no cover - makes this an async generator

    des, ser = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(abort, des, ser)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(abort_stream, des, ser)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(abort, des, ser)
    return grpc.stream_stream_rpc_method_handler(abort_stream, des, ser)
