"""`hookmesh serve agui`: the AG-UI gateway (HTTP + SSE and the chat page) until a signal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookmesh.cli._app import host_port, serve_app
from hookmesh.cli._serve import ListenOption, config_option, serve_service


@serve_app.command("agui")
def serve_agui(
    config: Annotated[Path | None, config_option("agui.md")] = None,
    listen: ListenOption = None,
    agent: Annotated[
        str | None, typer.Option(help="Agent service address (host:port) the runs go to.")
    ] = None,
) -> None:
    """Serve AG-UI over HTTP + SSE, and the chat page at /, until SIGTERM/SIGINT."""
    from hookmesh.services.agui import load_agui_config, start_agui_gateway

    if agent:
        host_port(agent, "--agent")
    serve_service(
        load_agui_config,
        start_agui_gateway,
        config,
        "agui gateway ",
        listen=listen,
        agent=agent,
    )
