"""gRPC services of the suite: agent, memory, retrieval, TTS, and the AG-UI, A2A and MCP
gateways, each with its store and config.

The server platform they share moved to `hookmesh.server`; its names stay importable from
here for one release."""

from hookmesh.server import (
    ANONYMOUS,
    DEFAULT_GRACE,
    REQUEST_ID_HEADER,
    USER_HEADER,
    AddressInUseError,
    AuthConfig,
    Authenticator,
    Caller,
    RunningServer,
    Service,
    TLSConfig,
    bound_address,
    current_principal,
    current_user,
    request_id_var,
    scoped_user,
    serve_until_signal,
    start_server,
    wait_for_signal,
)

__all__ = [
    "ANONYMOUS",
    "DEFAULT_GRACE",
    "REQUEST_ID_HEADER",
    "USER_HEADER",
    "AddressInUseError",
    "AuthConfig",
    "Authenticator",
    "Caller",
    "RunningServer",
    "Service",
    "TLSConfig",
    "bound_address",
    "current_principal",
    "current_user",
    "request_id_var",
    "scoped_user",
    "serve_until_signal",
    "start_server",
    "wait_for_signal",
]
