"""`hookmesh serve agent|retrieval|memory|tts`: run one service until SIGTERM/SIGINT.

Every serve command takes the same auth flags (`--token-env`, `--token-file`, `--tls-cert`,
`--tls-key`, `--client-ca`); they set the ``auth`` block of the service's config
(docs/security.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from hookmesh.cli._app import (
    AcceptTokensEnv,
    AcceptTokensFile,
    AppDirOption,
    ClientCaOption,
    ConfigOption,
    TlsCertOption,
    TlsKeyOption,
    auth_flags,
    die,
    host_port,
    import_from,
    run,
    serve_app,
)

ListenOption = Annotated[str | None, typer.Option(help="Address; overrides the config's listen.")]


def config_option(page: str) -> Any:
    """The ``--config`` option of a service documented in docs/services/`page`."""
    return typer.Option("--config", "-c", help=f"YAML config file (see docs/services/{page}).")


def serve_service(
    load: Callable[..., Any],
    start: Callable[[Any], Awaitable[Any]],
    config: Path | None,
    label: str,
    auth: dict[str, Any] | None = None,
    **overrides: Any,
) -> NoReturn:
    """Load a service's config (a bad file is a one-line usage error), serve until a signal,
    then exit with the service's status.

    Args:
        auth: ``auth`` keys set by flags (`auth_flags`), merged over the file's.
    """
    from hookmesh.services import serve_until_signal

    if overrides.get("listen"):
        host_port(overrides["listen"])
    if auth:
        overrides["auth"] = auth
    try:
        settings = load(config, **{k: v for k, v in overrides.items() if v is not None})
    except ValueError as exc:
        die(str(exc))
    serving = serve_until_signal(
        lambda: start(settings), listen=settings.listen, label=label, grace=settings.grace_seconds
    )
    raise typer.Exit(run(serving))


@serve_app.command("agent")
def serve_agent(
    config: ConfigOption = None,
    listen: ListenOption = None,
    app_dir: AppDirOption = Path("."),
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Serve the agent service (sessions in SQLite or PostgreSQL) until SIGTERM/SIGINT;
    SIGHUP reloads its middlewares from the config (docs/deploy.md)."""
    from hookmesh.services.agent import AgentService, load_config, start_agent_service

    import_from(app_dir)
    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    overrides: dict[str, Any] = {"listen": listen} if listen else {}
    if auth:
        overrides["auth"] = auth

    async def start(settings: Any) -> AgentService:
        service = await start_agent_service(
            settings, reload_from=lambda: load_config(config, **overrides)
        )
        service.reloader.on_sighup()
        return service

    serve_service(load_config, start, config, "agent service ", auth, listen=listen)


@serve_app.command("retrieval")
def serve_retrieval(
    config: Annotated[Path | None, config_option("retrieval.md")] = None,
    listen: ListenOption = None,
    store: Annotated[
        str | None,
        typer.Option(help="Store URL (sqlite:///path.db or postgresql://...); a secret."),
    ] = None,
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Serve knowledge bases (SQLite by default, or PostgreSQL) until SIGTERM/SIGINT."""
    from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service

    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    serve_service(
        load_retrieval_config,
        start_retrieval_service,
        config,
        "retrieval service ",
        auth,
        listen=listen,
        store=store,
    )


@serve_app.command("memory")
def serve_memory(
    config: Annotated[Path | None, config_option("memory.md")] = None,
    listen: ListenOption = None,
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Serve long-term memories (SQLite or PostgreSQL) until SIGTERM/SIGINT."""
    from hookmesh.services.memory import load_memory_config, start_memory_service

    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    serve_service(
        load_memory_config, start_memory_service, config, "memory service ", auth, listen=listen
    )


@serve_app.command("tts")
def serve_tts(
    config: Annotated[Path | None, config_option("tts.md")] = None,
    listen: ListenOption = None,
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Serve text to speech (espeak-ng, streamed as produced) until SIGTERM/SIGINT."""
    from hookmesh.services.tts import load_tts_config, start_tts_service

    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    serve_service(load_tts_config, start_tts_service, config, "tts service ", auth, listen=listen)
