"""What every hookmesh gRPC server shares: health, reflection, credentials, graceful stop."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

from hookmesh._security import ServerTLS, TokenInterceptor, server_credentials
from hookmesh.metrics import MetricsEndpoint, start_metrics

log = logging.getLogger("hookmesh.server")

_HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name

DEFAULT_GRACE = 5.0
"""Seconds in-flight calls get to finish on shutdown."""


@dataclass
class Service:
    """One gRPC service to host: its full name, its servicer and the generated adder."""

    name: str
    servicer: Any
    add: Callable[[Any, grpc.aio.Server], None]


@dataclass
class RunningServer:
    """A started server, its bound port and its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    servicers: dict[str, Any] = field(default_factory=dict)
    """The hosted servicers by service name."""
    metrics: MetricsEndpoint | None = None
    """The Prometheus scrape endpoint, when one was asked for."""

    async def stop(self, grace: float | None = DEFAULT_GRACE) -> None:
        """Report NOT_SERVING, then stop, giving in-flight calls `grace` seconds."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.metrics is not None:
            self.metrics.close()


async def start_server(
    services: Sequence[Service],
    address: str = "127.0.0.1:0",
    *,
    tls: ServerTLS | None = None,
    token: str | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
    metrics_listen: str = "",
) -> RunningServer:
    """Start a grpc.aio server hosting `services` plus health and reflection.

    Args:
        services: The services to host.
        address: ``host:port``; port 0 lets the OS pick (see `RunningServer.port`).
        tls: Serve TLS (mTLS when it names a client CA); plaintext when None.
        token: Require ``authorization: Bearer <token>`` on every call but health and
            reflection (a secret: never logged).
        interceptors: More server interceptors, applied after the token check.
        options: gRPC server options.
        metrics_listen: ``host:port`` of a Prometheus scrape endpoint (``/metrics``) for the
            process's metrics (`hookmesh.metrics`); empty for none. With the OTLP variables
            set, metrics are exported over OTLP either way.
    """
    # Tracing comes first so a rejected call still joins the caller's trace. Health is not
    # traced: its aio Watch writes via the context, which the tracing wrapper cannot wrap.
    tracing = aio_server_interceptor(filter_=filters.negate(filters.service_name(_HEALTH)))
    chain = [tracing, *([TokenInterceptor(token)] if token else []), *interceptors]
    server = grpc.aio.server(interceptors=chain, options=list(options))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [s.name for s in services]
    for s in services:
        s.add(s.servicer, server)
    reflection.enable_server_reflection(
        [
            *names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    port = (
        server.add_secure_port(address, server_credentials(tls))
        if tls
        else server.add_insecure_port(address)
    )
    await server.start()
    try:
        endpoint = start_metrics(metrics_listen)
    except BaseException:
        await server.stop(None)
        raise
    for name in ("", *names):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    servicers = {s.name: s.servicer for s in services}
    return RunningServer(server, port, health_servicer, servicers, endpoint)


async def wait_for_signal() -> None:
    """Return on the first SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def serve_until_signal(
    start: Callable[[], Awaitable[Any]], *, listen: str, label: str, grace: float
) -> int:
    """Start a service, announce it, serve until SIGTERM/SIGINT, stop gracefully.

    Prints ``{label}listening on HOST:PORT`` (flushed) once it accepts calls, so a parent
    process can read the bound port; a service that cannot start prints why and returns 1.
    """
    try:
        service = await start()
    except Exception as exc:  # a missing engine or model, a bad URL, an unreachable database
        log.debug("start failed", exc_info=exc)
        print(f"error: cannot start the {label.strip() or 'service'}: {exc}", file=sys.stderr)
        return 1
    host = listen.rpartition(":")[0]
    print(f"{label}listening on {host}:{service.port}", flush=True)
    try:
        await wait_for_signal()
    finally:
        await service.stop(grace)
    return 0
