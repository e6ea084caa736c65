"""Remote middleware: the sidecar host and the proxy that makes a sidecar look local."""

from hookmesh._security import ClientTLS, ServerTLS
from hookmesh.remote._breaker import BreakerSettings
from hookmesh.remote._costs import cost_lines
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._host import MiddlewareServicer
from hookmesh.remote._proxy import DEFAULT_TIMEOUT, RemoteMiddleware
from hookmesh.remote._rollout import Disagreement, Rollout, RolloutSettings, session_bucket
from hookmesh.remote._runners import pass_rest
from hookmesh.remote._serve import SERVICE_NAME, load_middleware, serve_middleware
from hookmesh.remote._shadow import ShadowMiddleware
from hookmesh.remote._sidecar_agent import SidecarAgent

__all__ = [
    "DEFAULT_TIMEOUT",
    "SERVICE_NAME",
    "BreakerSettings",
    "ClientTLS",
    "Disagreement",
    "MiddlewareServicer",
    "RemoteHookError",
    "RemoteMiddleware",
    "Rollout",
    "RolloutSettings",
    "ServerTLS",
    "ShadowMiddleware",
    "SidecarAgent",
    "SidecarError",
    "cost_lines",
    "load_middleware",
    "pass_rest",
    "serve_middleware",
    "session_bucket",
]
