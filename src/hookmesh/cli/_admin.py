"""`hookmesh admin reload`: operate a running agent service (its AdminService)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from hookmesh.cli._app import TokenEnvOption, app, host_port, run, token_from_env

admin_app = typer.Typer(help="Operate a running agent service (admin principals only).")
app.add_typer(admin_app, name="admin", no_args_is_help=True)


@admin_app.command("reload")
def reload(
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds the reload may take.")] = 30.0,
) -> None:
    """Reload the service's middlewares from its config file without a restart: new replies
    take the new chain, running ones finish on the old. A bad config changes nothing."""
    from hookmesh.client import AdminClient, AgentClientError

    address = host_port(target, "--target")
    token = token_from_env(token_env)

    async def call() -> int:
        try:
            async with AdminClient(address, timeout=timeout, token=token) as admin:
                done = await admin.reload_middlewares()
        except AgentClientError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        keys = ", ".join(done.middleware_keys) or "no middlewares"
        print(f"generation {done.generation}: {keys}")
        print(f"{done.draining_replies} running replies finish on the previous chain")
        if done.restart_keys:
            print(f"not applied without a restart: {', '.join(done.restart_keys)}")
        return 0

    raise typer.Exit(run(call()))
