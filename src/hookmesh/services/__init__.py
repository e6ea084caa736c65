"""gRPC services of the suite and what they share: one way to start, serve and stop a server."""

from hookmesh.services._auth import (
    ANONYMOUS,
    USER_HEADER,
    AuthConfig,
    Authenticator,
    Caller,
    TLSConfig,
    current_principal,
    current_user,
    scoped_user,
)
from hookmesh.services._interceptor import REQUEST_ID_HEADER, request_id_var
from hookmesh.services._server import (
    DEFAULT_GRACE,
    AddressInUseError,
    RunningServer,
    Service,
    bound_address,
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
