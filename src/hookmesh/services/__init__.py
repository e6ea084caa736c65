"""gRPC services of the suite and what they share: one way to start, serve and stop a server."""

from hookmesh.services._server import (
    DEFAULT_GRACE,
    RunningServer,
    Service,
    serve_until_signal,
    start_server,
    wait_for_signal,
)

__all__ = [
    "DEFAULT_GRACE",
    "RunningServer",
    "Service",
    "serve_until_signal",
    "start_server",
    "wait_for_signal",
]
