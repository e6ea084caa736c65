"""Building the MCP server and serving it over stdio or streamable HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hookmesh.server import HttpServer, MetricsDoor, start_metrics
from hookmesh.services.mcp._callers import ClientPool, HookmeshTokenVerifier
from hookmesh.services.mcp._config import McpServerSettings
from hookmesh.services.mcp._tools import register_tools

INSTRUCTIONS = (
    "hookmesh: search the knowledge bases (search_knowledge), recall and remember facts about "
    "the user (recall, remember), and turn text into speech (speak)."
)


def build_mcp_server(settings: McpServerSettings, pool: ClientPool, url: str = "") -> MCPServer:
    """The MCP server with the tools of every configured service; over HTTP with callers
    checked against ``settings.auth`` tokens when it has any.

    Raises:
        ValueError: ``auth`` names an unset variable or an unreadable token file.
    """
    checks = settings.transport == "http" and bool(
        settings.auth.token_env or settings.auth.token_file
    )
    server = MCPServer(
        "hookmesh",
        instructions=INSTRUCTIONS,
        token_verifier=HookmeshTokenVerifier(settings.auth) if checks else None,
        auth=AuthSettings(
            issuer_url=url or "http://127.0.0.1",
            resource_server_url=None,
            validate_token_resource=False,
        )
        if checks
        else None,
    )
    register_tools(server, settings, pool)
    if settings.transport == "http":

        @server.custom_route("/healthz", methods=["GET"])
        async def healthz(request: Request) -> Response:
            """Serving while the process runs (`hookmesh status`, readiness probes); needs
            no token, says nothing about the services behind it."""
            return JSONResponse({"status": "serving"})

    return server


@dataclass
class McpHttpServer:
    """`hookmesh serve mcp` over streamable HTTP: its HTTP server and service clients."""

    http: HttpServer
    pool: ClientPool
    metrics: MetricsDoor | None = None
    """The Prometheus scrape endpoint, when `metrics_listen` asks for one."""

    @property
    def port(self) -> int:
        """The bound port."""
        return self.http.port

    async def stop(self, grace: float | None) -> None:
        """Stop serving (open requests get `grace` seconds), then close the service clients."""
        try:
            await self.http.stop(grace)
        finally:
            await self.pool.close()
            if self.metrics is not None:
                await self.metrics.stop()


async def start_mcp_http_server(
    settings: McpServerSettings, *, address: str | None = None
) -> McpHttpServer:
    """Serve the MCP endpoint ``/mcp`` over streamable HTTP.

    Args:
        settings: The configuration.
        address: Overrides `settings.listen` (tests pass ``127.0.0.1:0``).
    """
    pool = ClientPool(settings)
    listen = address or settings.listen
    server = build_mcp_server(settings, pool, f"http://{listen}")
    # NOTE(hookmesh): HttpServer checks Host, Origin, content type and body size for every
    # gateway alike, so the SDK's own checks (loopback only, plain-text errors) are off.
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=settings.max_request_bytes,
    )
    http = HttpServer(app, listen, settings, lifespan=True)
    await http.start()
    try:
        metrics = await start_metrics(
            settings.metrics_listen,
            allowed_hosts=settings.metrics_allowed_hosts,
            token_env=settings.metrics_token_env,
        )
    except BaseException:
        await McpHttpServer(http, pool).stop(None)
        raise
    return McpHttpServer(http, pool, metrics)


async def serve_mcp_stdio(settings: McpServerSettings) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    pool = ClientPool(settings)
    try:
        await build_mcp_server(settings, pool).run_stdio_async()
    finally:
        await pool.close()
