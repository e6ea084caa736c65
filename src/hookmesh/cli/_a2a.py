"""`hookmesh serve a2a`: an agent service as an A2A agent (card, JSON-RPC, HTTP+JSON, gRPC)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookmesh.cli._app import host_port, serve_app
from hookmesh.cli._serve import ListenOption, config_option, serve_service


@serve_app.command("a2a")
def serve_a2a(
    config: Annotated[Path | None, config_option("a2a.md")] = None,
    listen: ListenOption = None,
    agent: Annotated[
        str | None, typer.Option(help="Agent service address (host:port) the tasks go to.")
    ] = None,
    grpc_listen: Annotated[
        str | None, typer.Option(help="Also serve A2A over gRPC on this host:port.")
    ] = None,
) -> None:
    """Serve the agent as an A2A agent over HTTP (JSON-RPC, HTTP+JSON, the agent card) and
    optionally gRPC, until SIGTERM/SIGINT."""
    from hookmesh.services.a2a import load_a2a_config, start_a2a_server

    for value, flag in ((agent, "--agent"), (grpc_listen, "--grpc-listen")):
        if value:
            host_port(value, flag)
    serve_service(
        load_a2a_config,
        start_a2a_server,
        config,
        "a2a server ",
        listen=listen,
        agent=agent,
        grpc_listen=grpc_listen,
    )
