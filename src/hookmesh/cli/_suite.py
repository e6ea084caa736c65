"""`hookmesh up` (the whole suite on loopback), `hookmesh status` and `hookmesh demo`."""

from __future__ import annotations

import asyncio
import sys
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
    app,
    auth_flags,
    client_tls,
    die,
    host_port,
    import_from,
    run,
)

_HEALTH_TIMEOUT = 3.0


@app.command()
def up(
    config: ConfigOption = None,
    listen: Annotated[str | None, typer.Option(help="Agent service address.")] = None,
    data_dir: Annotated[
        Path, typer.Option(help="Where the default suite keeps its data (without --config).")
    ] = Path("hookmesh-data"),
    app_dir: AppDirOption = Path("."),
    token_env: AcceptTokensEnv = None,
    token_file: AcceptTokensFile = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    client_ca: ClientCaOption = None,
) -> None:
    """Start the whole suite on loopback: retrieval, TTS and memory services, the sidecars,
    the agent, the AG-UI and A2A gateways and the MCP server. Ctrl-C stops everything.

    With --token-env or --token-file every server requires a bearer token (the suite's
    parts get one of their own); TLS flags apply to the agent service."""
    from hookmesh.services import wait_for_signal
    from hookmesh.services.agent import load_config
    from hookmesh.suite import (
        SuiteError,
        default_suite_config,
        describe_model,
        secure_suite,
        start_suite,
    )

    import_from(app_dir)
    auth = auth_flags(token_env, token_file, tls_cert, tls_key, client_ca)
    overrides = {"listen": host_port(listen)} if listen else {}
    try:
        if config is None:
            settings = default_suite_config(data_dir)
            if overrides:
                settings = settings.model_copy(update=overrides)
        else:
            settings = load_config(config, **overrides)
        if auth:
            settings = secure_suite(settings, auth)
    except ValueError as exc:
        die(str(exc))

    async def serve() -> int:
        try:
            async with start_suite(settings, app_dir=app_dir.resolve()) as suite:
                print(f"agent      {suite.agent_address}   model: {describe_model(settings)}")
                for name, address in suite.sidecars.items():
                    print(f"sidecar    {address}   {name}")
                for name, address in suite.services.items():
                    print(f"{name:10s} {address}")
                print("Ctrl-C stops everything.", flush=True)
                await wait_for_signal()
                print("stopping…", flush=True)
        except SuiteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    raise typer.Exit(run(serve()))


@app.command()
def status(
    config: ConfigOption = None,
    tls_ca: TlsCaOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each service.")] = (
        _HEALTH_TIMEOUT
    ),
) -> None:
    """Check the health of every service of the suite (the default ports, or --config's);
    exit 1 when one is not serving."""
    from hookmesh.services.agent import load_config
    from hookmesh.suite import GATEWAYS, default_suite_config, service_settings

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

    async def circuit(name: str, target: str) -> str:
        """A sidecar's circuit as the agent sees it (``not serving``: open, it is skipped)."""
        if not name.startswith("sidecar "):
            return ""
        return await _health(settings.listen, timeout, tls, f"sidecar:{target}")

    async def check() -> int:
        results = await asyncio.gather(
            *(
                _page_health(t, timeout) if name in GATEWAYS else _health(t, timeout, tls)
                for name, t in targets.items()
            )
        )
        circuits = await asyncio.gather(*(circuit(name, t) for name, t in targets.items()))
        results = [
            f"{state}; the agent skips it (circuit open)" if seen == "not serving" else state
            for state, seen in zip(results, circuits, strict=True)
        ]
        for (name, target), state in zip(targets.items(), results, strict=True):
            print(f"{name:18s} {target:22s} {state}")
        return 0 if all(r == "serving" for r in results) else 1

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
    """Run the suite with the embedded demo config and two conversations, then stop."""
    from rich.console import Console

    from hookmesh.cli._printer import EventPrinter
    from hookmesh.suite.demo import run_demo

    raise typer.Exit(run(run_demo(Console(highlight=False), EventPrinter, serve=serve)))
