"""`hookmesh admin reload`, `forget` and `export`: operate a running agent service (its
AdminService)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hookmesh.cli._app import TlsCaOption, TokenEnvOption, app, call_with

admin_app = typer.Typer(help="Operate a running agent service (admin principals only).")
app.add_typer(admin_app, name="admin", no_args_is_help=True)


@admin_app.command("reload")
def reload(
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds the reload may take.")] = 30.0,
) -> None:
    """Reload the service's middlewares from its config file without a restart: new replies
    take the new chain, running ones finish on the old. A bad config changes nothing."""
    from hookmesh.client import AdminClient

    async def work(admin: Any) -> int:
        done = await admin.reload_middlewares()
        keys = ", ".join(done.middleware_keys) or "no middlewares"
        print(f"generation {done.generation}: {keys}")
        print(f"{done.draining_replies} running replies finish on the previous chain")
        if done.restart_keys:
            print(f"not applied without a restart: {', '.join(done.restart_keys)}")
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)


@admin_app.command("forget")
def forget(
    user: Annotated[str, typer.Option("--user", help="The user to erase everywhere.")],
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds the erasure may take.")] = 120.0,
) -> None:
    """Erase a user from every store the service reaches (sessions, reply journals, A2A tasks,
    memories) and print the receipt; a second run erases nothing more."""
    from hookmesh.client import AdminClient

    async def work(admin: Any) -> int:
        receipt = await admin.forget_user(user)
        for store, count in receipt:
            print(f"{store}: {count} deleted")
        print(f"forgot {user!r} in {len(receipt)} stores")
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)


@admin_app.command("export")
def export(
    user: Annotated[str, typer.Option("--user", help="The user whose data to export.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The JSON Lines file to write (0600).")
    ],
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds the export may take.")] = 600.0,
) -> None:
    """Write everything the service's stores keep about a user to a JSON Lines file, one
    {"store": ..., "record": ...} object a line (docs/security.md, "Export format"), and
    print the records per store. The file appears only once the export is whole."""
    from hookmesh._files import private_file
    from hookmesh.client import AdminClient

    partial = output.with_name(output.name + ".partial")
    progress = sys.stderr.isatty()

    async def work(admin: Any) -> int:
        counts: dict[str, int] = {}
        private_file(partial)
        try:
            with partial.open("w", encoding="utf-8") as out:
                async for store, record in admin.export_user(user):
                    out.write(f'{{"store":{json.dumps(store)},"record":{record}}}\n')
                    counts[store] = counts.get(store, 0) + 1
                    if progress:
                        done = sum(counts.values())
                        print(f"\r{done} records ({store})", end="", file=sys.stderr)
            os.replace(partial, output)
        finally:
            partial.unlink(missing_ok=True)
            if progress:
                print(file=sys.stderr)
        for store, count in counts.items():
            print(f"{store}: {count} records")
        print(f"exported {sum(counts.values())} records of {user!r} to {output}")
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)
