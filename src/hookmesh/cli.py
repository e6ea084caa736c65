"""The `hookmesh` command."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="hookmesh",
    help="An agent runtime whose every customisation is a middleware, local or remote.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """hookmesh: agents whose every customisation is a middleware."""


def _host_port(listen: str) -> str:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise typer.BadParameter(f"{listen!r} is not host:port (port 0 picks a free one)")
    return listen


def _token(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    token = os.environ.get(env_name)
    if not token:
        raise typer.BadParameter(
            f"environment variable {env_name} is empty or unset", param_hint="--token-env"
        )
    return token


@app.command()
def sidecar(
    middleware: Annotated[
        str, typer.Option(help="The middleware to serve, as package.module:attribute.")
    ],
    listen: Annotated[
        str, typer.Option(help="Address to listen on; port 0 picks a free one.")
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
    app_dir: Annotated[Path, typer.Option(help="Directory to import the middleware from.")] = Path(
        "."
    ),
) -> None:
    """Serve one in-process middleware as a MiddlewareService sidecar.

    Prints `listening on HOST:PORT` once it accepts calls; stops gracefully on SIGTERM/SIGINT.
    """
    from hookmesh.remote import ServerTLS, load_middleware, serve_middleware
    from hookmesh.services._server import serve_until_signal

    address = _host_port(listen)
    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together")
    if client_ca is not None and tls_cert is None:
        raise typer.BadParameter("--client-ca needs --tls-cert and --tls-key")
    tls = ServerTLS(tls_cert, tls_key, client_ca) if tls_cert and tls_key else None
    token = _token(token_env)
    sys.path.insert(0, str(app_dir.resolve()))
    try:
        mw = load_middleware(middleware)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--middleware") from None

    async def run() -> None:
        running = await serve_middleware(mw, address, tls=tls, token=token)
        host = address.rpartition(":")[0]
        print(f"listening on {host}:{running.port}", flush=True)
        await serve_until_signal(running)

    _run(run())


def _run(coro: object) -> None:
    logging.basicConfig(level=os.environ.get("HOOKMESH_LOG_LEVEL", "INFO"), stream=sys.stderr)
    try:
        import uvloop

        uvloop.run(coro)  # type: ignore[arg-type]
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]


def main() -> None:
    """Entry point of the `hookmesh` script."""
    app()


if __name__ == "__main__":
    main()
