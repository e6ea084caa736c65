"""The `hookmesh` root command, its `serve` group, and what every command shares."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

# NOTE(hookmesh): the suite forks processes (sidecars, espeak-ng) from a process that runs
# gRPC; its fork handlers can abort the child, and nothing here relies on them.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

app = typer.Typer(
    name="hookmesh",
    help="An agent runtime whose every customisation is a middleware, local or remote.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
serve_app = typer.Typer(help="Run one service.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _version(show: bool) -> None:
    if show:
        print(f"hookmesh {package_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    unused_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """hookmesh: agents whose every customisation is a middleware."""
    _log_level()  # a bad HOOKMESH_LOG_LEVEL is a usage error before any command starts
    _log_format()


def package_version() -> str:
    """The installed hookmesh version."""
    try:
        return version("hookmesh")
    except PackageNotFoundError:  # running from a source tree without an install
        return "unknown"


def die(message: str, code: int = 2) -> NoReturn:
    """End the command with one line on stderr: ``error: <message>``.

    Code 2 is a usage error (bad flag, bad file), 1 a failure of the work itself.
    """
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def host_port(listen: str, flag: str = "--listen") -> str:
    """`listen` when it is ``host:port`` or ``unix:///path``; a one-line usage error if not."""
    if listen.startswith("unix:"):
        return listen
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        die(f"{flag} {listen!r} is not host:port (port 0 picks a free one)")
    return listen


def token_from_env(env_name: str | None) -> str | None:
    """The token held in `env_name` (None when no variable is named)."""
    if env_name is None:
        return None
    token = os.environ.get(env_name)
    if not token:
        die(f"--token-env: environment variable {env_name} is empty or unset")
    return token


ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (see docs/config.md).")
]
AppDirOption = Annotated[
    Path, typer.Option(help="Directory to import tools and middlewares from (first on the path).")
]
TokenEnvOption = Annotated[
    str | None, typer.Option(help="Send the bearer token held in this environment variable.")
]


def import_from(app_dir: Path) -> None:
    """Let ``package.module:attribute`` specs name modules under `app_dir`."""
    if not app_dir.is_dir():
        die(f"--app-dir {app_dir} is not a directory")
    sys.path.insert(0, str(app_dir.resolve()))


TlsCaOption = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca",
        help="Use TLS, trusting this CA (PEM); for mTLS also set HOOKMESH_CLIENT_CERT and "
        "HOOKMESH_CLIENT_KEY to the client's certificate and key files.",
    ),
]


def client_tls(ca: Path | None) -> Any:
    """The TLS settings of a client command (None: plaintext); a one-line error for a
    missing file."""
    if ca is None:
        return None
    from hookmesh.remote import ClientTLS

    cert, key = os.environ.get("HOOKMESH_CLIENT_CERT"), os.environ.get("HOOKMESH_CLIENT_KEY")
    for what, path in (("--tls-ca", str(ca)), ("HOOKMESH_CLIENT_CERT", cert),
                       ("HOOKMESH_CLIENT_KEY", key)):  # fmt: skip
        if path and not Path(path).is_file():
            die(f"{what}: no such file {path}")
    if bool(cert) != bool(key):
        die("HOOKMESH_CLIENT_CERT and HOOKMESH_CLIENT_KEY go together")
    return ClientTLS(ca, cert, key)


def check_timeout(timeout: float) -> float:
    """`timeout` when it is a number of seconds above 0; a one-line usage error if not."""
    if not timeout > 0:
        die(f"--timeout must be seconds above 0, not {timeout:g}")
    return timeout


def call_service(
    open_client: Callable[[], Any],
    address: str,
    deadline: float | None,
    work: Callable[[Any], Awaitable[int]],
    *,
    service: str,
    tls: Any = None,
    timeout: float | None = None,
) -> NoReturn:
    """Run `work(client)` and exit with its code; a failure the service reports, or its
    silence past `deadline`, prints one line with a way out (`hookmesh.cli._errors`) and
    exits 1, or 2 for a value the service refused (never a traceback).

    A `deadline` of None leaves each call to its own timeout, for work of many calls.

    Args:
        service: What `address` should be (``agent``, ``retrieval``…), for the words.
        tls: The client's TLS settings, to ask a wrong server what it is.
        timeout: Each call's deadline, named when one passes (`deadline` when None).
    """
    from hookmesh.cli._errors import Callee, failure_line
    from hookmesh.client import AgentClientError

    async def call() -> int:
        try:
            async with asyncio.timeout(deadline), open_client() as client:
                return await work(client)
        except AgentClientError as exc:
            line, code = await failure_line(
                exc, Callee(address, service, timeout or deadline, tls=tls)
            )
            print(line, file=sys.stderr)
            return code
        except TimeoutError:
            if deadline is None:  # not the deadline's: a bug, so keep its traceback
                raise
            print(f"error: no answer from {address} within {deadline:g} s", file=sys.stderr)
        return 1

    raise typer.Exit(run(call()))


def call_with(
    client_class: Callable[..., Any],
    target: str,
    timeout: float,
    token_env: str | None,
    tls_ca: Path | None,
    work: Callable[[Any], Awaitable[int]],
) -> NoReturn:
    """`call_service` on a `client_class` client built from a client command's shared flags
    (--target, --timeout, --token-env, --tls-ca), so each command is only its `work`."""
    from hookmesh.cli._errors import service_of

    address = host_port(target, "--target")
    check_timeout(timeout)
    token, tls = token_from_env(token_env), client_tls(tls_ca)
    call_service(
        lambda: client_class(address, timeout=timeout, token=token, tls=tls),
        address,
        timeout,
        work,
        service=service_of(client_class),
        tls=tls,
    )


AcceptTokensEnv = Annotated[
    str | None,
    typer.Option(
        "--token-env",
        help="Require a bearer token: the accepted ones are in this environment variable "
        "(TOKEN or PRINCIPAL:TOKEN entries, comma-separated).",
    ),
]
AcceptTokensFile = Annotated[
    Path | None,
    typer.Option(
        help="Require a bearer token: the accepted ones are in this file (one TOKEN or "
        "PRINCIPAL:TOKEN per line; list old and new while rotating)."
    ),
]
TlsCertOption = Annotated[Path | None, typer.Option(help="Serve TLS: certificate chain (PEM).")]
TlsKeyOption = Annotated[Path | None, typer.Option(help="Serve TLS: private key (PEM).")]
ClientCaOption = Annotated[
    Path | None, typer.Option(help="Require client certificates signed by this CA (mTLS).")
]


def auth_flags(
    token_env: str | None,
    token_file: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    client_ca: Path | None,
) -> dict[str, Any]:
    """The ``auth`` config keys the server flags set (merged over the file's ``auth:``)."""
    if (tls_cert is None) != (tls_key is None):
        die("--tls-cert and --tls-key go together")
    if client_ca is not None and tls_cert is None:
        die("--client-ca needs --tls-cert and --tls-key")
    for flag, path in (("--token-file", token_file), ("--tls-cert", tls_cert),
                       ("--tls-key", tls_key), ("--client-ca", client_ca)):  # fmt: skip
        if path is not None and not path.is_file():
            die(f"{flag}: no such file {path}")
    if token_env is not None and not os.environ.get(token_env):
        die(f"--token-env: environment variable {token_env} is empty or unset")
    auth: dict[str, Any] = {}
    if token_env:
        auth["token_env"] = token_env
    if token_file:
        auth["token_file"] = str(token_file)
    if tls_cert and tls_key:
        tls = {"cert": str(tls_cert), "key": str(tls_key)}
        auth["tls"] = {**tls, "client_ca": str(client_ca)} if client_ca else tls
    return auth


def _log_level() -> int:
    name = os.environ.get("HOOKMESH_LOG_LEVEL", "WARNING").upper()
    if name not in _LOG_LEVELS:
        die(f"HOOKMESH_LOG_LEVEL={name.lower()!r} is not one of {', '.join(_LOG_LEVELS)}")
    return int(getattr(logging, name))


def _log_format() -> str:
    from hookmesh.cli._logging import LOG_FORMATS, log_format

    fmt = log_format()
    if fmt not in LOG_FORMATS:
        die(f"HOOKMESH_LOG_FORMAT={fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    return fmt


def _setup_tracing() -> None:
    """Export spans over OTLP when the standard OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "hookmesh")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def run(coro: Any) -> Any:
    """Run `coro` on uvloop (asyncio when unavailable) with logging and tracing set up."""
    from hookmesh.cli._logging import setup_logging

    setup_logging(_log_level(), _log_format())
    _setup_tracing()
    try:
        import uvloop
    except ImportError:
        runner: Any = asyncio.run
    else:
        runner = uvloop.run
    try:
        return runner(coro)
    except BrokenPipeError:
        # The reader went away (`hookmesh chat --json | head -3`): it has what it wanted, so
        # stop quietly (status 0, as Node's chat.js), and keep the interpreter's final flush
        # from failing again. Caught here because click turns it into status 1.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def main() -> None:
    """Entry point of the `hookmesh` script: usage errors are one line, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # typer's parsing errors (a missing option, …)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        print(f"error: {exc.format_message()}{hint}", file=sys.stderr)
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)
