"""`hookmesh sidecar`: serve one in-process middleware as a MiddlewareService."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from hookmesh.cli._app import AppDirOption, app, die, host_port, import_from, run, token_from_env


@app.command()
def sidecar(
    middleware: Annotated[
        str, typer.Option(help="The middleware to serve, as package.module:attribute.")
    ],
    listen: Annotated[
        str,
        typer.Option(help="host:port (port 0 picks a free one), or unix:///path for a socket."),
    ] = "127.0.0.1:7001",
    tls_cert: Annotated[
        Path | None, typer.Option(help="Server certificate chain (PEM): serve TLS.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="Server private key (PEM).")] = None,
    client_ca: Annotated[
        Path | None, typer.Option(help="Require client certificates signed by this CA (mTLS).")
    ] = None,
    token_env: Annotated[
        str | None, typer.Option(help="Require the bearer token held in this environment variable.")
    ] = None,
    app_dir: AppDirOption = Path("."),
) -> None:
    """Serve one in-process middleware as a MiddlewareService sidecar.

    Prints `listening on HOST:PORT` once it accepts calls; stops gracefully on SIGTERM/SIGINT.
    """
    from hookmesh.remote import ServerTLS, load_middleware, serve_middleware
    from hookmesh.services import DEFAULT_GRACE, bound_address, wait_for_signal

    address = host_port(listen)
    if (tls_cert is None) != (tls_key is None):
        die("--tls-cert and --tls-key go together")
    if client_ca is not None and tls_cert is None:
        die("--client-ca needs --tls-cert and --tls-key")
    tls = ServerTLS(tls_cert, tls_key, client_ca) if tls_cert and tls_key else None
    token = token_from_env(token_env)
    import_from(app_dir)
    try:
        mw = load_middleware(middleware)
    except ValueError as exc:
        die(f"--middleware: {exc}")

    async def serve() -> None:
        start, aclose = getattr(mw, "start", None), getattr(mw, "aclose", None)
        if start is not None:  # e.g. MCP tools: connect before Describe lists the tools
            await start()
        try:
            running = await serve_middleware(mw, address, tls=tls, token=token)
            print(f"listening on {bound_address(address, running.port)}", flush=True)
            logging.getLogger("hookmesh.sidecar").info("serving %s", mw.middleware_key())
            try:
                await wait_for_signal()
            finally:
                await running.stop(DEFAULT_GRACE)
        finally:
            if aclose is not None:
                await aclose()

    run(serve())
