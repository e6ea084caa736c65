"""`hookmesh up` (the whole suite on loopback), `hookmesh status` and `hookmesh demo`."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from hookmesh.cli._app import (
    AcceptTokensEnv,
    AcceptTokensFile,
    AppDirOption,
    ClientCaOption,
    ConfigOption,
    TlsCaOption,
    TlsCertOption,
    TlsKeyOption,
    TokenEnvOption,
    app,
    auth_flags,
    client_tls,
    die,
    host_port,
    import_from,
    run,
    token_from_env,
)

_HEALTH_TIMEOUT = 3.0


@app.command()
def up(
    config: ConfigOption = None,
    listen: Annotated[str | None, typer.Option(help="Agent service address.")] = None,
    data_dir: Annotated[
        Path, typer.Option(help="Where the default suite keeps its data (without --config).")
    ] = Path("hookmesh-data"),
    replicas: Annotated[
        int,
        typer.Option(
            min=0,
            help="Run the agent as N processes sharing sessions in a temporary PostgreSQL, "
            "behind Envoy on the agent's address (docs/deploy.md); 0: one, in this process.",
        ),
    ] = 0,
    app_dir: AppDirOption = Path("."),
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Start the whole suite on loopback: retrieval, TTS and memory services, the sidecars,
    the agent, the AG-UI and A2A gateways and the MCP server. Ctrl-C stops everything.

    With --config, exactly what the file configures runs: the agent, its `sidecars` and its
    `services` (docs/config.md). With --token-env or --token-file every server requires a
    bearer token (the suite's parts get one of their own); TLS flags apply to the agent
    service. With --replicas,
    SIGHUP reloads every replica's middlewares from the config."""
    from hookmesh.services import wait_for_signal
    from hookmesh.suite import SuiteError, describe_model, start_suite

    import_from(app_dir)
    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    if replicas and "tls" in auth:
        die("--replicas takes no TLS flags: Envoy is the front door (docs/deploy.md)")
    overrides = {"listen": host_port(listen)} if listen else {}
    try:
        settings = _suite_settings(config, data_dir, overrides, auth)
    except ValueError as exc:
        die(str(exc))

    async def serve() -> int:
        try:
            if replicas:
                reread = partial(_suite_settings, config, data_dir, overrides, auth)
                return await _serve_replicas(settings, replicas, app_dir.resolve(), reread)
            async with start_suite(settings, app_dir=app_dir.resolve()) as suite:
                print(f"agent      {suite.agent_address}   model: {describe_model(settings)}")
                _print_parts(suite.sidecars, suite.services)
                if config is not None and not settings.services:
                    _note_agent_only(config, bool(settings.sidecars))
                print("Ctrl-C stops everything.", flush=True)
                await wait_for_signal()
                print("stopping…", flush=True)
        except SuiteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    raise typer.Exit(run(serve()))


def _suite_settings(
    config: Path | None, data_dir: Path, overrides: dict[str, str], auth: dict[str, Any]
) -> Any:
    """The suite's config from --config (or the default suite), the flags and the
    environment.

    Raises:
        ValueError: A bad file, variable or token file; the message says which.
    """
    from hookmesh.services.agent import load_config
    from hookmesh.suite import default_suite_config, secure_suite

    if config is None:
        settings = default_suite_config(data_dir)
        if overrides:
            settings = settings.model_copy(update=overrides)
    else:
        settings = load_config(config, **overrides)
    return secure_suite(settings, auth) if auth else settings


def _note_agent_only(config: Path, sidecars: bool) -> None:
    """Say that a config without ``services`` runs no suite (an agent's own config, usually),
    on stderr: stdout lists what runs."""
    parts = "the agent and its sidecars run" if sidecars else "the agent runs"
    print(
        f"note: {config} has no `services:`, so only {parts} (no retrieval, memory, TTS or "
        "gateways; add them as docs/config.md shows, or run `hookmesh up` without --config)",
        file=sys.stderr,
        flush=True,
    )


def _print_parts(sidecars: dict[str, str], services: dict[str, str]) -> None:
    for name, address in sidecars.items():
        print(f"sidecar    {address}   {name}")
    for name, address in services.items():
        print(f"{name:10s} {address}")


async def _serve_replicas(
    settings: Any, count: int, app_dir: Path, reread: Callable[[], Any]
) -> int:
    """`up --replicas`: print where everything is, reload every replica on SIGHUP (the
    config read again), stop on SIGTERM or SIGINT."""
    from hookmesh.services import wait_for_signal
    from hookmesh.suite import SuiteError, describe_model, start_replicas

    async with start_replicas(settings, count, app_dir=app_dir) as mesh:
        print(f"agent      {mesh.agent_address}   envoy in front of {count} replicas   "
              f"model: {describe_model(settings)}")  # fmt: skip
        for number, replica in enumerate(mesh.replicas, 1):
            print(f"{f'replica-{number}':10s} {replica.address}   pid {replica.pid}")
        print(f"postgres   {mesh.postgres_url}   temporary: removed when up stops")
        print(f"envoy      http://{mesh.envoy_admin}   admin")
        _print_parts(mesh.sidecars, mesh.services)

        def reload() -> None:
            try:
                signalled = mesh.reload(reread())
            except (SuiteError, ValueError) as exc:  # a bad config: the replicas keep theirs
                print(f"error: reload: {exc}", file=sys.stderr)
                return
            print(f"reloading middlewares: {signalled} of {count} replicas", flush=True)

        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
        hup = f"kill -HUP {os.getpid()} reloads every replica"
        print(f"Ctrl-C stops everything; {hup}.", flush=True)
        await wait_for_signal()
        print("stopping…", flush=True)
    return 0


@app.command()
def status(
    config: ConfigOption = None,
    target: Annotated[
        list[str] | None,
        typer.Option(help="Check this gRPC server (host:port; repeatable) instead of the suite."),
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to keep asking until every one serves (0: once).")
    ] = 0.0,
    tls_ca: TlsCaOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each service.")] = (
        _HEALTH_TIMEOUT
    ),
    sidecars: Annotated[
        bool,
        typer.Option(
            "--sidecars",
            help="Also list each sidecar of the agent's chain as the agent sees it (described, "
            "serving, last error, never invoked); needs an admin principal's token.",
        ),
    ] = False,
    token_env: TokenEnvOption = None,
) -> None:
    """Check the health of every service of the suite (the default ports, or --config's), or
    of the --target servers; exit 1 when one is not serving. With --sidecars, the agent (the
    suite's, or the first --target) also tells its sidecars; one not serving exits 1 too."""
    from hookmesh.services.agent import load_config
    from hookmesh.suite import GATEWAYS, default_suite_config, service_settings

    if target:
        targets = {f"server {i}": host_port(t, "--target") for i, t in enumerate(target, 1)}
    else:
        try:
            settings = default_suite_config() if config is None else load_config(config)
        except ValueError as exc:
            die(str(exc))
        targets = {"agent": settings.listen}
        for sidecar in settings.sidecars:
            targets[f"sidecar {sidecar.name}"] = sidecar.listen
        try:
            for name, overrides in settings.services.items():
                targets[name] = service_settings(name, overrides).listen
        except ValueError as exc:
            die(str(exc))
    tls = client_tls(tls_ca)
    token = token_from_env(token_env)

    agent = targets.get("agent", "")

    async def circuit(name: str, address: str) -> str:
        """A sidecar's circuit as the agent sees it (``not serving``: open, it is skipped)."""
        if not (agent and name.startswith("sidecar ")):
            return ""
        return await _health(agent, timeout, tls, f"sidecar:{address}")

    async def ask() -> list[str]:
        return await asyncio.gather(
            *(
                _page_health(t, timeout) if name in GATEWAYS else _health(t, timeout, tls)
                for name, t in targets.items()
            )
        )

    async def check() -> int:
        deadline = asyncio.get_running_loop().time() + wait
        # NOTE(cli): health has no "tell me when" call, so --wait asks again until the deadline.
        while True:
            results = await ask()
            serving = all(r == "serving" for r in results)
            if serving or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.5)
        circuits = await asyncio.gather(*(circuit(name, t) for name, t in targets.items()))
        results = [
            f"{state}; the agent skips it (circuit open)" if seen == "not serving" else state
            for state, seen in zip(results, circuits, strict=True)
        ]
        for (name, address), state in zip(targets.items(), results, strict=True):
            print(f"{name:18s} {address:22s} {state}")
        healthy = all(r == "serving" for r in results)
        if sidecars:
            from hookmesh.cli._sidecar_status import sidecar_lines

            lines, serving = await sidecar_lines(
                agent or next(iter(targets.values())), timeout, token, tls
            )
            print("\n".join(lines))
            healthy = healthy and serving
        return 0 if healthy else 1

    raise typer.Exit(run(check()))


async def _health(target: str, timeout: float, tls: Any, service: str = "") -> str:
    """``serving``, ``not serving`` or why it could not be asked; `service` names what the
    server reports on (itself by default; ``sidecar:<address>``: a sidecar's circuit as the
    agent sees it)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from hookmesh._security import open_channel

    if target.rpartition(":")[2] == "0":
        return "unknown (port 0: picked at start)"
    async with open_channel(target, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            request = health_pb2.HealthCheckRequest(service=service)
            answer = await stub.Check(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return "down (nothing answers)"
            return f"down ({exc.code().name})"
    if answer.status == health_pb2.HealthCheckResponse.SERVING:
        return "serving"
    return "not serving"


async def _page_health(listen: str, timeout: float) -> str:
    """A gateway's ``/healthz`` (AG-UI, A2A, MCP): ``serving`` or why not."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            answer = await http.get(f"http://{listen}/healthz")
    except httpx.HTTPError:
        return "down (nothing answers)"
    return "serving" if answer.status_code == 200 else f"not serving (HTTP {answer.status_code})"


@app.command()
def demo(
    serve: Annotated[
        bool, typer.Option("--serve", help="Then serve the chat page until Ctrl-C.")
    ] = False,
) -> None:
    """Run the suite with the embedded demo config and three conversations (the last one
    handed off to a chef agent), then stop."""
    from rich.console import Console

    from hookmesh.cli._printer import EventPrinter
    from hookmesh.suite.demo import run_demo

    raise typer.Exit(
        run(run_demo(Console(highlight=False, soft_wrap=True), EventPrinter, serve=serve))
    )
