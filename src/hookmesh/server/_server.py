"""What every hookmesh gRPC server shares: one start path (auth, tracing, request ids, health,
reflection, keepalive policy, refusing a busy port) and a graceful stop."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from hookmesh._security import SERVER_KEEPALIVE, ServerTLS, server_credentials
from hookmesh.server._auth import OPEN_SERVICES, AuthConfig, Authenticator, is_loopback
from hookmesh.server._components import publish_components, unpublish_components
from hookmesh.server._interceptor import ServerCallInterceptor
from hookmesh.server._metrics_door import MetricsDoor, start_metrics

log = logging.getLogger("hookmesh.server")

_HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
_REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"

DEFAULT_GRACE = 5.0
"""Seconds in-flight calls get to finish on shutdown."""


class ListenError(OSError):
    """A server cannot listen on its address; the message says which and why."""

    def __str__(self) -> str:
        return str(self.strerror)


class AddressInUseError(ListenError):
    """The address a server should listen on is taken by another process."""


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
    metrics: MetricsDoor | None = None
    """The Prometheus scrape endpoint, when one was asked for."""

    async def stop(self, grace: float | None = DEFAULT_GRACE) -> None:
        """Report NOT_SERVING, then stop, giving in-flight calls `grace` seconds."""
        unpublish_components(self.health)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.metrics is not None:
            await self.metrics.stop()


def check_free(address: str) -> None:
    """Fail fast, in one line, when another process listens on `address`.

    gRPC binds with SO_REUSEPORT by default, which would let two servers share a port and
    split its calls; hookmesh servers turn that off, and this probe names the problem.

    Raises:
        AddressInUseError: The port is taken.
    """
    if address.startswith("unix:"):
        return
    host, _, port = address.rpartition(":")
    if port == "0":
        return
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressInUseError(exc.errno, f"address {address} is already in use") from None
            raise ListenError(exc.errno, f"cannot listen on {address}: {exc.strerror}") from None


async def start_server(
    services: Sequence[Service],
    address: str = "127.0.0.1:0",
    *,
    auth: AuthConfig | None = None,
    tls: ServerTLS | None = None,
    authenticator: Authenticator | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
    metrics_listen: str = "",
    metrics_allowed_hosts: Sequence[str] = (),
    metrics_token_env: str | None = None,
) -> RunningServer:
    """Start a grpc.aio server hosting `services` plus health and reflection (v1 and v1alpha).

    Health answers for the server (``""``), each hosted service, and each component the
    process reports on (`report_component`: ``sidecar:<address>``, as its agents see it).

    Every call gets a request id, a SERVER span and the caller's principal (see
    `ServerCallInterceptor`); a `HookmeshError` a servicer raises becomes its rich status,
    any other error INTERNAL with the request id.

    Args:
        services: The services to host.
        address: ``host:port`` (port 0 lets the OS pick, see `RunningServer.port`) or
            ``unix:///path``.
        auth: Tokens, TLS and principals (docs/security.md); overrides `tls` and
            `authenticator`. Every caller is ``anonymous`` when nothing checks them.
        tls: Serve TLS (mTLS when it names a client CA), when `auth` is not given.
        authenticator: Checks credentials, when `auth` is not given.
        interceptors: More server interceptors, run after the caller is known.
        options: gRPC server options (over the defaults, keepalive included).
        metrics_listen: ``host:port`` of a Prometheus scrape endpoint (``/metrics``) for the
            process's metrics (`hookmesh.metrics`); empty for none. With the OTLP variables
            set, metrics are exported over OTLP either way.
        metrics_allowed_hosts: Host headers the endpoint accepts beyond the loopback ones.
        metrics_token_env: Environment variable holding the tokens a scrape must send
            (``authorization: Bearer``); None asks for none.

    Raises:
        AddressInUseError: Another process listens on `address`.
        ValueError: `auth` or `metrics_token_env` names an unset variable or an unreadable
            token file.
    """
    open_services: Sequence[str] = OPEN_SERVICES
    if auth is not None:
        tls = auth.server_tls()
        authenticator = Authenticator.from_config(auth)
        open_services = auth.open_services
    if authenticator is not None and tls is None and not is_loopback(address):
        log.warning(
            "%s checks bearer tokens over plaintext on a non-loopback address: tokens can be "
            "read on the network; serve TLS (docs/security.md)",
            address,
        )
    check_free(address)
    chain = [ServerCallInterceptor(authenticator, open_services), *interceptors]
    server = grpc.aio.server(
        interceptors=chain,
        # NOTE(server): gRPC takes the first of repeated options, so the caller's go first.
        options=[*options, ("grpc.so_reuseport", 0), *SERVER_KEEPALIVE],
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [s.name for s in services]
    for s in services:
        s.add(s.servicer, server)
    _enable_reflection([*names, _HEALTH], server)
    try:
        port = (
            server.add_secure_port(address, server_credentials(tls))
            if tls
            else server.add_insecure_port(address)
        )
    except RuntimeError:
        raise ListenError(errno.EADDRNOTAVAIL, f"cannot listen on {address}") from None
    await server.start()
    try:
        endpoint = await start_metrics(
            metrics_listen, allowed_hosts=metrics_allowed_hosts, token_env=metrics_token_env
        )
    except BaseException:
        await server.stop(None)
        raise
    for name in ("", *names):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    await publish_components(health_servicer)
    servicers = {s.name: s.servicer for s in services}
    return RunningServer(server, port, health_servicer, servicers, endpoint)


def _enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Server reflection v1alpha (grpcio-reflection) and v1: the two share their wire format,
    so one servicer answers both."""
    servicer = reflection.aio.ReflectionServicer(
        [*service_names, reflection.SERVICE_NAME, _REFLECTION_V1]
    )
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(_REFLECTION_V1, {"ServerReflectionInfo": v1}),)
    )


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
    process can read the bound port; a service that cannot start prints why in one line and
    returns 1.
    """
    try:
        service = await start()
    except Exception as exc:  # a busy port, a missing engine or model, an unreachable database
        log.debug("start failed", exc_info=exc)
        print(f"error: cannot start the {label.strip() or 'service'}: {exc}", file=sys.stderr)
        return 1
    print(f"{label}listening on {bound_address(listen, service.port)}", flush=True)
    try:
        await wait_for_signal()
    finally:
        await service.stop(grace)
    return 0


def bound_address(listen: str, port: int) -> str:
    """The address a server listening on `listen` really serves (the OS-picked port)."""
    if listen.startswith("unix:"):
        return listen
    return f"{listen.rpartition(':')[0]}:{port}"
