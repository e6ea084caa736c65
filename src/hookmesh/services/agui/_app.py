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
from ag_ui.core import BaseEvent, Message
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from hookmesh.client import AgentClient, AgentClientError
from hookmesh.errors import SchemaError
from hookmesh.schema import AgentEvent
from hookmesh.server import HttpServer
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
from hookmesh.services.agui._request import HttpError, bearer_token
from hookmesh.services.agui._sse import event_stream

log = logging.getLogger("hookmesh.agui")

_LOOKUP_TIMEOUT = 30.0
"""Seconds the session lookup before a run may take."""
_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAVAILABLE: 503,
}
"""Agent refusals that answer the request itself; any other becomes the run's RUN_ERROR."""
_MESSAGES = TypeAdapter(list[Message])


def _schema_error(exc: SchemaError) -> HttpError:
    return HttpError(400, exc.reason, exc.message, exc.violations)


def _refusal(exc: AgentClientError) -> HttpError | None:
    status = _HTTP_STATUS.get(exc.code)
    if status is None:
        return None
    return HttpError(status, exc.reason or exc.code.name, exc.message, exc.violations)


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
                raise (_refusal(exc) or failed) from None
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
                snapshot = _snapshot(run.messages)
        stream = self._call(run, plan, token)
        try:
            first = await anext(stream)
        except AgentClientError as exc:
            await stream.aclose()
            refusal = _refusal(exc)
            if refusal is not None:
                raise refusal from None
            body_events = self._refused(events, run, exc.message, exc.reason or exc.code.name)
            return self._respond(body_events)
        except StopAsyncIteration:
            body_events = self._refused(events, run, "the agent sent no events", "NO_EVENTS")
            return self._respond(body_events)
        return self._respond(self._events(events, run, snapshot, first, stream))

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

    async def _events(
        self,
        events: RunEvents,
        run: RunRequest,
        snapshot: list[Any] | None,
        first: AgentEvent,
        stream: Any,
    ) -> AsyncIterator[BaseEvent]:
        try:
            for event in events.start(run.state, snapshot):
                yield event
            for event in events.map(first):
                yield event
            try:
                async for agent_event in stream:
                    for event in events.map(agent_event):
                        yield event
            except AgentClientError as exc:
                for event in events.fail(exc.message, exc.reason or exc.code.name):
                    yield event
            if not events.finished:
                for event in events.fail("the agent's stream ended early", "INCOMPLETE_REPLY"):
                    yield event
        finally:
            await stream.aclose()


def _snapshot(messages: list[Any]) -> list[Any] | None:
    """The client's messages for a MESSAGES_SNAPSHOT, when they are valid AG-UI messages (the
    snapshot only makes the resumed stream self-contained; it is skipped otherwise)."""
    try:
        return _MESSAGES.validate_python(messages)
    except ValidationError:
        return None


def create_app(config: AguiGatewayConfig, client: AgentClient) -> Starlette:
    """The gateway's ASGI app over an agent client; `start_agui_gateway` serves it behind the
    HTTP gateways' checks (hosts, origins, CORS, limits).

    ``app.state.stopping`` set to True makes ``/healthz`` answer 503.
    """
    page = files("hookmesh.services.agui").joinpath("static/index.html").read_text("utf-8")
    page_headers = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

    async def index(unused_request: Request) -> Response:
        return HTMLResponse(page, headers=page_headers)

    async def healthz(request: Request) -> Response:
        if request.app.state.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "serving"})

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/agui", _Runner(config, client).handle, methods=["POST"]),
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
    return AguiGateway(http, app, client)
