"""The AG-UI gateway: ``POST /agui`` runs the agent and streams AG-UI events as SSE, ``GET /``
serves the chat page, ``GET /healthz`` reports whether it serves."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import grpc
from ag_ui.core import BaseEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from hookmesh.client import AgentClient, AgentClientError
from hookmesh.errors import SchemaError
from hookmesh.server import HttpServer, MetricsDoor, start_metrics
from hookmesh.services.agui._config import AguiGatewayConfig
from hookmesh.services.agui._events import RunEvents
from hookmesh.services.agui._input import (
    ReplyPlan,
    ResumePlan,
    RunRefused,
    RunRequest,
    parse_run_input,
    plan_run,
)
from hookmesh.services.agui._relay import messages_snapshot, relay
from hookmesh.services.agui._request import HttpError, bearer_token, refusal
from hookmesh.services.agui._sse import event_stream
from hookmesh.services.agui._threads import thread_routes

log = logging.getLogger("hookmesh.agui")

_LOOKUP_TIMEOUT = 30.0
"""Seconds the session lookup before a run may take."""
_VENDORED = ("marked.esm.js", "purify.es.mjs")
"""The chat page's vendored modules (static/vendor/README.md), served at /vendor/<name>."""


def _schema_error(exc: SchemaError) -> HttpError:
    return HttpError(400, exc.reason, exc.message, exc.violations)


class _Runner:
    """Runs one POST /agui against the agent."""

    def __init__(self, config: AguiGatewayConfig, client: AgentClient) -> None:
        self.config = config
        self.client = client

    async def handle(self, request: Request) -> Response:
        """The endpoint: an SSE stream of the run, or an HTTP error before it starts."""
        try:
            return await self._run(request)
        except HttpError as exc:
            return exc.response()

    async def _run(self, request: Request) -> Response:
        body = await request.body()  # within the gateway's limits (HttpGuard)
        try:
            data = json.loads(body)
        except ValueError:
            raise HttpError(400, "INVALID_JSON", "the body is not JSON") from None
        try:
            run = parse_run_input(data)
        except SchemaError as exc:
            raise _schema_error(exc) from None
        token = bearer_token(request)
        try:
            session = await self.client.get_session(
                run.thread_id, timeout=_LOOKUP_TIMEOUT, token=token
            )
        except AgentClientError as exc:
            if exc.code != grpc.StatusCode.NOT_FOUND:
                failed = HttpError(502, exc.reason or exc.code.name, exc.message)
                raise (refusal(exc, self.config.agent) or failed) from None
            session = None
        events = RunEvents(run.thread_id, run.run_id)
        try:
            plan = plan_run(run, session)
        except SchemaError as exc:
            raise _schema_error(exc) from None
        except RunRefused as refused:
            return self._respond(self._refused(events, run, refused.message, refused.code))
        snapshot = None
        if isinstance(plan, ResumePlan):
            events = RunEvents(run.thread_id, run.run_id, plan.answered)
            if plan.confirmations:
                snapshot = messages_snapshot(run.messages)
        stream = self._call(run, plan, token)
        try:
            first = await anext(stream)
        except AgentClientError as exc:
            await stream.aclose()
            answer = refusal(exc, self.config.agent)
            if answer is not None:
                raise answer from None
            body_events = self._refused(events, run, exc.message, exc.reason or exc.code.name)
            return self._respond(body_events)
        except StopAsyncIteration:
            body_events = self._refused(events, run, "the agent sent no events", "NO_EVENTS")
            return self._respond(body_events)
        return self._respond(relay(events, run.state, snapshot, first, stream))

    def _respond(self, events: AsyncIterator[BaseEvent]) -> Response:
        return event_stream(events, self.config.keepalive_seconds)

    def _call(self, run: RunRequest, plan: ReplyPlan | ResumePlan, token: str | None) -> Any:
        timeout = self.config.run_timeout
        if isinstance(plan, ReplyPlan):
            return self.client.reply(
                plan.messages,
                session_id=run.thread_id,
                client_tools=run.tools,
                timeout=timeout,
                token=token,
                **run.options,
            )
        return self.client.resume(
            run.thread_id,
            confirmations=plan.confirmations,
            external_results=plan.external_results,
            client_tools=run.tools,
            timeout=timeout,
            token=token,
        )

    async def _refused(
        self, events: RunEvents, run: RunRequest, message: str, code: str
    ) -> AsyncIterator[BaseEvent]:
        for event in events.start(run.state, None):
            yield event
        for event in events.fail(message, code):
            yield event


def create_app(config: AguiGatewayConfig, client: AgentClient) -> Starlette:
    """The gateway's ASGI app over an agent client; `start_agui_gateway` serves it behind the
    HTTP gateways' checks (hosts, origins, CORS, limits).

    ``app.state.stopping`` set to True makes ``/healthz`` answer 503.
    """
    static = files("hookmesh.services.agui").joinpath("static")
    page = static.joinpath("index.html").read_text("utf-8")
    page_headers = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
    vendored = {name: static.joinpath("vendor", name).read_text("utf-8") for name in _VENDORED}

    async def index(unused_request: Request) -> Response:
        return HTMLResponse(page, headers=page_headers)

    async def vendor(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in vendored:
            return Response(status_code=404)
        headers = {**page_headers, "Cache-Control": "public, max-age=86400"}
        return Response(vendored[name], media_type="text/javascript", headers=headers)

    async def healthz(request: Request) -> Response:
        if request.app.state.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "serving"})

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/vendor/{name}", vendor, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/agui", _Runner(config, client).handle, methods=["POST"]),
            *thread_routes(config, client),
        ],
    )
    app.state.stopping = False
    return app


@dataclass
class AguiGateway:
    """A running gateway: its HTTP server, app and agent client."""

    http: HttpServer
    app: Starlette
    client: AgentClient
    metrics: MetricsDoor | None = None
    """The Prometheus scrape endpoint, when `metrics_listen` asks for one."""

    @property
    def port(self) -> int:
        """The bound port."""
        return self.http.port

    async def stop(self, grace: float | None) -> None:
        """Report 503 on /healthz, stop accepting, give open streams `grace` seconds (then
        they are cancelled, which interrupts their replies), close the agent channel."""
        self.app.state.stopping = True
        try:
            await self.http.stop(grace)
        finally:
            await self.client.close()
            if self.metrics is not None:
                await self.metrics.stop()


async def start_agui_gateway(
    config: AguiGatewayConfig, *, address: str | None = None
) -> AguiGateway:
    """Serve the gateway over HTTP (the agent channel connects on first use).

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).

    Raises:
        OSError: The address cannot be bound.
        ValueError: The address is not ``host:port``.
    """
    client = AgentClient(config.agent, timeout=config.run_timeout)
    try:
        app = create_app(config, client)
        http = HttpServer(app, address or config.listen, config)
        await http.start()
    except BaseException:
        await client.close()
        raise
    try:
        metrics = await start_metrics(
            config.metrics_listen,
            allowed_hosts=config.metrics_allowed_hosts,
            token_env=config.metrics_token_env,
        )
    except BaseException:
        await AguiGateway(http, app, client).stop(None)
        raise
    return AguiGateway(http, app, client, metrics)
