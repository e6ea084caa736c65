"""`hookmesh admin reload`, `forget` and `export`: operate a running agent service (its
AdminService)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from hookmesh.cli._app import TlsCaOption, TokenEnvOption, app, call_with, die

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
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from hookmesh._files import private_file
    from hookmesh.client import AdminClient

    if not output.parent.is_dir():
        die(f"--output: folder {output.parent} does not exist")
    if output.is_dir():
        die(f"--output: {output} is a folder")
    partial = output.with_name(output.name + ".partial")
    err = Console(stderr=True, highlight=False, soft_wrap=True)

    async def work(admin: Any) -> int:
        try:
            return await write(admin)
        except OSError as exc:  # the file, not the service: a full disk, no permission
            die(f"--output: {exc.strerror or exc} ({exc.filename or output})", 1)

    async def write(admin: Any) -> int:
        counts: dict[str, int] = {}
        private_file(partial)
        # NOTE(cli): a bar on a terminal only. The server sends no total (a store's size is
        # not known before it is read), so the bars pulse and count what came so far.
        progress = Progress(
            TextColumn("{task.description:<20}"),
            BarColumn(),
            TextColumn("{task.completed} records"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        rows: dict[str, TaskID] = {}
        try:
            with progress, partial.open("w", encoding="utf-8") as out:
                whole = progress.add_task("all stores", total=None)
                async for store, record in admin.export_user(user):
                    out.write(f'{{"store":{json.dumps(store)},"record":{record}}}\n')
                    counts[store] = counts.get(store, 0) + 1
                    if store not in rows:
                        rows[store] = progress.add_task(store, total=None)
                        progress.refresh()  # each store shows, however fast the next one comes
                    progress.advance(rows[store])
                    progress.advance(whole)
                progress.refresh()
            os.replace(partial, output)
        finally:
            partial.unlink(missing_ok=True)
        for store, count in counts.items():
            print(f"{store}: {count} records")
        print(f"exported {sum(counts.values())} records of {user!r} to {output}")
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)
