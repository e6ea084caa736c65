"""`hookmesh sidecar`: serve one in-process middleware as a MiddlewareService."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from hookmesh.cli._app import (
    AcceptTokensEnv,
    AcceptTokensFile,
    AppDirOption,
    ClientCaOption,
    TlsCertOption,
    TlsKeyOption,
    app,
    auth_flags,
    die,
    host_port,
    import_from,
    run,
)
from hookmesh.errors import HookmeshError


@app.command()
def sidecar(
    middleware: Annotated[
        str, typer.Option(help="The middleware to serve, as package.module:attribute.")
    ],
    listen: Annotated[
        str,
        typer.Option(help="host:port (port 0 picks a free one), or unix:///path for a socket."),
    ] = "127.0.0.1:7001",
    app_dir: AppDirOption = Path("."),
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Serve one in-process middleware as a MiddlewareService sidecar.

    Prints `listening on HOST:PORT` once it accepts calls; stops gracefully on SIGTERM/SIGINT.
    """
    from hookmesh.remote import cost_lines, load_middleware, serve_middleware
    from hookmesh.services import DEFAULT_GRACE, AuthConfig, bound_address, wait_for_signal

    address = host_port(listen)
    auth = AuthConfig(**auth_flags(token_env, token_file, tls_cert, tls_key, client_ca))
    import_from(app_dir)
    try:
        mw = load_middleware(middleware)
    except ValueError as exc:
        die(f"--middleware: {exc}")

    async def serve() -> int:
        start, aclose = getattr(mw, "start", None), getattr(mw, "aclose", None)
        try:
            if start is not None:  # e.g. MCP tools: connect before Describe lists the tools
                await start()
            running = await serve_middleware(mw, address, auth=auth)
        except (OSError, ValueError, HookmeshError) as exc:
            if aclose is not None:
                await aclose()
            print(f"error: cannot start the sidecar: {exc}", file=sys.stderr)
            return 1
        # NOTE(cli): on stderr, before the address: stdout stays the address (and what the
        # middleware prints), for supervisors and scripts that read it.
        for line in cost_lines(mw.describe()):
            print(f"{mw.middleware_key()} {line}", file=sys.stderr, flush=True)
        print(f"listening on {bound_address(address, running.port)}", flush=True)
        logging.getLogger("hookmesh.sidecar").info("serving %s", mw.middleware_key())
        try:
            await wait_for_signal()
        finally:
            await running.stop(DEFAULT_GRACE)
            if aclose is not None:
                await aclose()
        return 0

    raise typer.Exit(run(serve()))
