"""Starting a sidecar: one middleware served as a MiddlewareService."""

from __future__ import annotations

from typing import Any

from hookmesh._imports import load_object
from hookmesh._security import ServerTLS
from hookmesh.middleware import Middleware, MiddlewareDefinitionError, check_middleware
from hookmesh.remote._host import MiddlewareServicer
from hookmesh.server import AuthConfig, Authenticator, RunningServer, Service, start_server
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc

SERVICE_NAME = _mw_pb2.DESCRIPTOR.services_by_name["MiddlewareService"].full_name
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest Intercept message a sidecar accepts by default (a context of many large
messages fits)."""


async def serve_middleware(
    middleware: Middleware,
    address: str = "127.0.0.1:0",
    *,
    tls: ServerTLS | None = None,
    token: str | None = None,
    auth: AuthConfig | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> RunningServer:
    """Start serving `middleware` at `address`; returns the running server (port included).

    Args:
        middleware: Any in-process middleware.
        address: ``host:port``; port 0 lets the OS pick.
        tls: TLS / mTLS settings; plaintext when None.
        token: Bearer token callers must send (a secret).
        auth: Tokens, TLS and principals as every server takes them; overrides `tls` and
            `token`.
        max_message_bytes: The largest message accepted (told to agents in Describe, so an
            oversized invocation fails alone instead of breaking the shared stream).

    Raises:
        ValueError: The middleware runs in process only (`Middleware.local_only_reason`).
    """
    if middleware.local_only_reason:
        raise ValueError(
            f"{middleware.middleware_key()} runs in the agent's process only: "
            f"{middleware.local_only_reason}"
        )
    servicer = MiddlewareServicer(middleware, max_message_bytes=max_message_bytes)
    return await start_server(
        [Service(SERVICE_NAME, servicer, _mw_grpc.add_MiddlewareServiceServicer_to_server)],
        address,
        auth=auth,
        tls=tls,
        authenticator=Authenticator({token: "default"}) if token else None,
        options=[("grpc.max_receive_message_length", max_message_bytes)],
    )


def load_middleware(spec: str, **params: Any) -> Middleware:
    """Import ``pkg.module:attr``; a class or factory is called with `params`.

    Raises:
        ValueError: The spec is malformed or does not name a middleware.
    """
    target = load_object(spec)
    if isinstance(target, type) or (callable(target) and not isinstance(target, Middleware)):
        try:
            target = target(**params)
        except TypeError as exc:
            raise ValueError(f"cannot build middleware {spec!r}: {exc}") from None
    elif params:
        raise ValueError(f"{spec!r} is an instance: it takes no params")
    if not isinstance(target, Middleware):
        raise ValueError(f"{spec!r} is a {type(target).__name__}, not a Middleware")
    try:
        check_middleware(target)
    except MiddlewareDefinitionError as exc:
        raise ValueError(str(exc)) from None
    return target
