"""The server platform every hookmesh server shares: one way to start, serve and stop a server,
auth, the interceptor, settings, HTTP limits and store error mapping."""

from hookmesh.server._auth import (
    ANONYMOUS,
    DEFAULT_PRINCIPAL,
    OPEN_SERVICES,
    USER_HEADER,
    AuthConfig,
    Authenticator,
    Caller,
    TLSConfig,
    current_principal,
    current_user,
    is_loopback,
    load_tokens,
    parse_tokens,
    scoped_user,
)
from hookmesh.server._components import report_component
from hookmesh.server._http import HttpServer
from hookmesh.server._http_settings import HttpGatewaySettings
from hookmesh.server._interceptor import REQUEST_ID_HEADER, ServerCallInterceptor, request_id_var
from hookmesh.server._metrics_door import MetricsDoor, start_metrics
from hookmesh.server._retention import Clock, RetentionConfig, Sweeper, utc_now
from hookmesh.server._server import (
    DEFAULT_GRACE,
    AddressInUseError,
    ListenError,
    RunningServer,
    Service,
    bound_address,
    check_free,
    serve_until_signal,
    start_server,
    wait_for_signal,
)
from hookmesh.server._settings import ServiceSettings, describe_errors, load_settings
from hookmesh.server._store_errors import is_outage, store_error, store_outages, store_rpc

__all__ = [
    "ANONYMOUS",
    "DEFAULT_GRACE",
    "DEFAULT_PRINCIPAL",
    "OPEN_SERVICES",
    "REQUEST_ID_HEADER",
    "USER_HEADER",
    "AddressInUseError",
    "AuthConfig",
    "Authenticator",
    "Caller",
    "Clock",
    "HttpGatewaySettings",
    "HttpServer",
    "ListenError",
    "MetricsDoor",
    "RetentionConfig",
    "RunningServer",
    "ServerCallInterceptor",
    "Service",
    "ServiceSettings",
    "Sweeper",
    "TLSConfig",
    "bound_address",
    "check_free",
    "current_principal",
    "current_user",
    "describe_errors",
    "is_loopback",
    "is_outage",
    "load_settings",
    "load_tokens",
    "parse_tokens",
    "report_component",
    "request_id_var",
    "scoped_user",
    "serve_until_signal",
    "start_metrics",
    "start_server",
    "store_error",
    "store_outages",
    "store_rpc",
    "utc_now",
    "wait_for_signal",
]
