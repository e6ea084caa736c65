"""`hookmesh serve mcp`: retrieval, memory and speech as an MCP server (stdio or HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hookmesh.cli._app import die, host_port, run, serve_app, token_from_env
from hookmesh.cli._serve import ListenOption, config_option, serve_service


@serve_app.command("mcp")
def serve_mcp(
    config: Annotated[Path | None, config_option("mcp.md")] = None,
    transport: Annotated[
        str | None, typer.Option(help="stdio (default: an MCP client starts this) or http.")
    ] = None,
    listen: ListenOption = None,
    retrieval: Annotated[
        str | None, typer.Option(help="Retrieval service address (host:port).")
    ] = None,
    memory: Annotated[str | None, typer.Option(help="Memory service address (host:port).")] = None,
    tts: Annotated[str | None, typer.Option(help="TTS service address (host:port).")] = None,
    knowledge_base: Annotated[
        list[str] | None,
        typer.Option("--knowledge-base", "--kb", help="Offer this knowledge base (repeatable)."),
    ] = None,
    user: Annotated[str | None, typer.Option(help="stdio: whose memories to use.")] = None,
    token_env: Annotated[
        str | None, typer.Option(help="stdio: send the token held in this variable.")
    ] = None,
) -> None:
    """Serve the suite's knowledge search, memories and speech as MCP tools: over stdio (for
    an MCP client that starts it) or streamable HTTP at /mcp, until SIGTERM/SIGINT."""
    from hookmesh.services.mcp import load_mcp_settings, serve_mcp_stdio, start_mcp_http_server

    if transport not in (None, "stdio", "http"):
        die(f"--transport {transport!r} is not stdio or http")
    token_from_env(token_env)  # an unset variable is one line, here, not a refusal later
    for value, flag in ((retrieval, "--retrieval"), (memory, "--memory"), (tts, "--tts")):
        if value:
            host_port(value, flag)
    overrides: dict[str, Any] = {
        "transport": transport,
        "listen": listen,
        "retrieval": retrieval,
        "memory": memory,
        "tts": tts,
        "knowledge_bases": knowledge_base or None,
        "user": user,
        "token_env": token_env,
    }
    chosen: Literal["stdio", "http"] | None = transport  # type: ignore[assignment]
    if chosen == "http" or (chosen is None and _configured_http(config)):
        if token_env is not None:
            die("--token-env is for stdio: over HTTP each caller's own token goes through")
        serve_service(load_mcp_settings, start_mcp_http_server, config, "mcp server ", **overrides)
    try:
        settings = load_mcp_settings(config, **{k: v for k, v in overrides.items() if v})
    except ValueError as exc:
        die(str(exc))
    raise typer.Exit(run(serve_mcp_stdio(settings)) or 0)


def _configured_http(config: Path | None) -> bool:
    from hookmesh.services.mcp import load_mcp_settings

    try:
        return load_mcp_settings(config).transport == "http"
    except ValueError as exc:
        die(str(exc))
