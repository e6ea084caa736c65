"""The A2A server: the agent card, the JSON-RPC and HTTP+JSON bindings over HTTP, and the gRPC
binding, all from the official a2a-sdk, in front of an agent service."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import grpc
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import (
    DefaultGrpcServerCallContextBuilder,
    DefaultRequestHandler,
    GrpcHandler,
)
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.types import a2a_pb2, a2a_pb2_grpc
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hookmesh.client import AgentClient
from hookmesh.server import (
    HttpServer,
    MetricsDoor,
    RunningServer,
    Service,
    start_metrics,
    start_server,
)
from hookmesh.services.a2a._card import JSONRPC_PATH, REST_PATH, CardSource, base_card
from hookmesh.services.a2a._checks import RequestChecks
from hookmesh.services.a2a._config import A2AServerConfig
from hookmesh.services.a2a._executor import HookmeshAgentExecutor, caller_token
from hookmesh.services.a2a._follow import DurableRequestHandler
from hookmesh.services.a2a._tasks import OpenTaskStore, open_task_store

A2A_SERVICE_NAME = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name


class _TokenUser(User):
    """The caller as A2A's task store sees it: a digest of its bearer token, so a task is
    read and cancelled only with the token that created it (the agent service checks the
    token itself)."""

    def __init__(self, token: str | None) -> None:
        self._name = hashlib.sha256(token.encode()).hexdigest()[:32] if token else ""

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


class _HttpCallContext(DefaultServerCallContextBuilder):
    def build(self, request: Request) -> ServerCallContext:
        call = super().build(request)
        call.user = _TokenUser(caller_token(call))
        return call


class _GrpcCallContext(DefaultGrpcServerCallContextBuilder):
    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        call = super().build(context)
        call.user = _TokenUser(caller_token(call))
        return call


@dataclass
class A2AServer:
    """A running A2A server: HTTP (card, JSON-RPC, HTTP+JSON), optional gRPC, the agent
    client, the task store."""

    http: HttpServer
    app: Starlette
    grpc_server: RunningServer | None
    client: AgentClient
    tasks: OpenTaskStore
    metrics: MetricsDoor | None = None
    """The Prometheus scrape endpoint, when `metrics_listen` asks for one."""

    @property
    def port(self) -> int:
        """The HTTP port."""
        return self.http.port

    @property
    def grpc_port(self) -> int | None:
        """The gRPC port, when served."""
        return self.grpc_server.port if self.grpc_server is not None else None

    async def stop(self, grace: float | None) -> None:
        """Report 503 on /healthz, stop both servers (open streams get `grace` seconds), close
        the agent channel and the task store."""
        self.app.state.stopping = True
        try:
            if self.grpc_server is not None:
                await self.grpc_server.stop(grace)
            await self.http.stop(grace)
        finally:
            await self.client.close()
            await self.tasks.close()
            if self.metrics is not None:
                await self.metrics.stop()


async def start_a2a_server(
    config: A2AServerConfig, *, address: str | None = None, grpc_address: str | None = None
) -> A2AServer:
    """Serve the agent service as an A2A agent (the agent channel connects on first use).

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        grpc_address: Overrides `config.grpc_listen`.

    Raises:
        OSError: An address cannot be bound, or the task store cannot be opened.
        ValueError: An address is not ``host:port``, or the store's URL is of no known kind.
    """
    tasks = await open_task_store(config.store, config.max_tasks)
    client = AgentClient(config.agent, timeout=config.run_timeout)
    grpc_running: RunningServer | None = None
    http: HttpServer | None = None
    try:
        executor = HookmeshAgentExecutor(client, config.run_timeout)
        placeholder = base_card(config, "http://127.0.0.1", None)
        handler = DurableRequestHandler(executor, tasks.store, agent_card=placeholder)
        app = Starlette()
        http = HttpServer(app, address or config.listen, config)
        host = (address or config.listen).rpartition(":")[0]
        http_url = config.public_url or f"http://{host}:{http.port}"
        grpc_listen = grpc_address or config.grpc_listen
        if grpc_listen:
            grpc_running = await start_server(
                [
                    Service(
                        A2A_SERVICE_NAME,
                        GrpcHandler(handler, context_builder=_GrpcCallContext()),
                        a2a_pb2_grpc.add_A2AServiceServicer_to_server,
                    )
                ],
                grpc_listen,
                auth=config.auth,
                interceptors=[RequestChecks()],
            )
        grpc_url = None
        if grpc_listen and grpc_running:
            grpc_url = f"{grpc_listen.rpartition(':')[0]}:{grpc_running.port}"
        card = base_card(config, http_url, grpc_url)
        source = CardSource(config, client, card)
        _mount(app, handler, source)
        await http.start()
    except BaseException:
        if grpc_running is not None:
            await grpc_running.stop(None)
        await client.close()
        await tasks.close()
        raise
    server = A2AServer(http, app, grpc_running, client, tasks)
    try:
        server.metrics = await start_metrics(
            config.metrics_listen,
            allowed_hosts=config.metrics_allowed_hosts,
            token_env=config.metrics_token_env,
        )
    except BaseException:
        await server.stop(None)
        raise
    return server


def _mount(app: Starlette, handler: DefaultRequestHandler, source: CardSource) -> None:
    async def healthz(request: Request) -> Response:
        if request.app.state.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "serving"})

    context = _HttpCallContext()
    app.router.routes.extend(
        [
            Route("/healthz", healthz, methods=["GET"]),
            *create_agent_card_routes(agent_card=source.base, card_modifier=source),
            *create_jsonrpc_routes(
                handler, rpc_url=JSONRPC_PATH, context_builder=context, enable_v0_3_compat=True
            ),
            *create_rest_routes(
                handler, context_builder=context, path_prefix=REST_PATH, enable_v0_3_compat=True
            ),
        ]
    )
    app.state.stopping = False
