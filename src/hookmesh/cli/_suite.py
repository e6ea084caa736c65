"""`hookmesh up` (the whole suite on loopback) and `hookmesh demo`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from hookmesh.cli._app import ConfigOption, app, die, host_port, run


@app.command()
def up(
    config: ConfigOption = None,
    listen: Annotated[str | None, typer.Option(help="Agent service address.")] = None,
) -> None:
    """Start the whole suite on loopback (services, sidecars, then the agent); Ctrl-C stops it."""
    from hookmesh.services import wait_for_signal
    from hookmesh.services.agent import load_config
    from hookmesh.services.suite import start_suite

    try:
        settings = load_config(config, **({"listen": host_port(listen)} if listen else {}))
    except ValueError as exc:
        die(str(exc))

    async def serve() -> None:
        async with start_suite(settings) as suite:
            console = Console()
            console.print(f"agent service  [bold]{suite.agent_address}[/bold]")
            for name, address in suite.services.items():
                console.print(f"{name} service  [bold]{address}[/bold]")
            for name, address in suite.sidecars.items():
                console.print(f"sidecar {name:7s}[bold]{address}[/bold]")
            console.print("[dim]Ctrl-C stops everything.[/dim]")
            await wait_for_signal()
            console.print("[dim]stopping…[/dim]")

    run(serve())


@app.command()
def demo(
    serve: Annotated[
        bool, typer.Option("--serve", help="Then serve the chat page until Ctrl-C.")
    ] = False,
) -> None:
    """Run the suite with the embedded demo config and two conversations, then stop."""
    from hookmesh.demo import run_demo

    raise typer.Exit(run(run_demo(Console(highlight=False), serve=serve)))
