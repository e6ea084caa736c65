"""What every way of running the suite starts the same way: the domain services in this
process, each sidecar in its own process, and the gateways in front of an agent."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from hookmesh._processes import stop_process
from hookmesh.server import bound_address, check_free
from hookmesh.services.agent import AgentServiceConfig, SidecarConfig

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0

GATEWAYS = ("agui", "a2a", "mcp")
"""Services that front others over HTTP: started after the agent, stopped before it."""


class SuiteError(Exception):
    """A part of the suite could not start; the message names it and says why."""


class Stoppable(Protocol):
    """A server this process runs (a service or a gateway)."""

    @property
    def port(self) -> int: ...

    async def stop(self, grace: float | None) -> None: ...


def service_settings(name: str, overrides: dict[str, Any]) -> Any:
    """The settings `hookmesh up` runs service `name` with: its `services.<name>` block over
    the service's own defaults and environment (MCP always over HTTP)."""
    if name == "agui":
        from hookmesh.services.agui import load_agui_config

        return load_agui_config(None, **overrides)
    if name == "a2a":
        from hookmesh.services.a2a import load_a2a_config

        return load_a2a_config(None, **overrides)
    if name == "mcp":
        from hookmesh.services.mcp import load_mcp_settings

        return load_mcp_settings(None, **{**overrides, "transport": "http"})
    if name == "retrieval":
        from hookmesh.services.retrieval import load_retrieval_config

        return load_retrieval_config(None, **overrides)
    if name == "memory":
        from hookmesh.services.memory import load_memory_config

        return load_memory_config(None, **overrides)
    from hookmesh.services.tts import load_tts_config

    return load_tts_config(None, **overrides)


def all_service_settings(config: AgentServiceConfig) -> dict[str, Any]:
    """`service_settings` of every service in `config.services`.

    Raises:
        SuiteError: A block is invalid; the message names it.
    """
    settings: dict[str, Any] = {}
    for name, overrides in config.services.items():
        try:
            settings[name] = service_settings(name, overrides)
        except ValueError as exc:
            raise SuiteError(f"services.{name}: {exc}") from None
    return settings


def check_addresses(
    config: AgentServiceConfig, settings: dict[str, Any], fronts: Iterable[str]
) -> None:
    """Fail before anything starts when a fixed address of the suite is taken, so a second
    suite fails at once without starting half of itself.

    Args:
        fronts: The suite's own front doors (the agent, or the proxy in front of replicas).

    Raises:
        SuiteError: The first address in use.
    """
    try:
        for listen in (
            *fronts,
            *(s.listen for s in settings.values()),
            *(s.grpc_listen for s in settings.values() if getattr(s, "grpc_listen", None)),
            *(s.listen for s in config.sidecars),
        ):
            check_free(listen)
    except OSError as exc:
        raise SuiteError(str(exc)) from None


async def _start_service(name: str, settings: Any) -> Stoppable:
    """Start a domain service in this process."""
    if name == "retrieval":
        from hookmesh.services.retrieval import start_retrieval_service

        return await start_retrieval_service(settings)
    if name == "memory":
        from hookmesh.services.memory import start_memory_service

        return await start_memory_service(settings)
    from hookmesh.services.tts import start_tts_service

    return await start_tts_service(settings)


async def _start_sidecar(
    sidecar: SidecarConfig, app_dir: Path | None
) -> tuple[asyncio.subprocess.Process, str]:
    name, middleware, listen = sidecar.name, sidecar.middleware, sidecar.listen
    extra = ["--app-dir", str(app_dir)] if app_dir is not None else []
    if sidecar.token_env:
        extra += ["--token-env", sidecar.token_env]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "sidecar", "--middleware", middleware,
        "--listen", listen, *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            line = (await process.stdout.readline()).decode().strip()
    except TimeoutError:
        line = ""
    if not line.startswith("listening on "):
        if process.returncode is None:
            process.kill()
        await process.wait()
        why = (await process.stderr.read()).decode().strip().splitlines()
        detail = why[-1].removeprefix("error: ") if why else line or "no output"
        raise SuiteError(f"sidecar {name} ({middleware}) did not start: {detail}")
    return process, line.removeprefix("listening on ")


@asynccontextmanager
async def start_backends(
    config: AgentServiceConfig, settings: dict[str, Any], app_dir: Path | None
) -> AsyncIterator[tuple[dict[str, str], dict[str, str]]]:
    """Start the domain services of `settings` (gateways excepted) in this process and every
    sidecar in its own; yields their addresses by name (services, sidecars). The sidecars
    stop first when the block ends, then the services.

    Raises:
        SuiteError: A part did not start; the message names it.
    """
    processes: list[asyncio.subprocess.Process] = []
    running: list[Stoppable] = []
    services: dict[str, str] = {}
    sidecars: dict[str, str] = {}
    try:
        for name, wanted in settings.items():
            if name in GATEWAYS:
                continue
            try:
                service = await _start_service(name, wanted)
            except Exception as exc:
                raise SuiteError(f"{name} service: {exc}") from exc
            running.append(service)
            services[name] = bound_address(wanted.listen, service.port)
        for sidecar in config.sidecars:
            process, address = await _start_sidecar(sidecar, app_dir)
            processes.append(process)
            sidecars[sidecar.name] = address
        yield services, sidecars
    finally:
        await asyncio.gather(*(stop_process(p, _STOP_TIMEOUT) for p in processes))
        for service in reversed(running):
            await service.stop(config.grace_seconds)


async def _start_gateway(
    name: str, settings: Any, agent_address: str, services: dict[str, str]
) -> tuple[Stoppable, str]:
    """A gateway in front of the agent (AG-UI, A2A) or the services (MCP) just started, and
    the URL it prints; the addresses it talks to are the ones the suite bound."""
    try:
        if name == "agui":
            from hookmesh.services.agui import start_agui_gateway

            server: Stoppable = await start_agui_gateway(
                settings.model_copy(update={"agent": agent_address})
            )
            path = "/"
        elif name == "a2a":
            from hookmesh.services.a2a import start_a2a_server

            server = await start_a2a_server(settings.model_copy(update={"agent": agent_address}))
            path = "/.well-known/agent-card.json"
        else:
            from hookmesh.services.mcp import start_mcp_http_server

            behind = {part: services.get(part) for part in ("retrieval", "memory", "tts")}
            server = await start_mcp_http_server(settings.model_copy(update=behind))
            path = "/mcp"
    except Exception as exc:
        raise SuiteError(f"{name} gateway: {exc}") from exc
    return server, f"http://{bound_address(settings.listen, server.port)}{path}"


@asynccontextmanager
async def start_gateways(
    settings: dict[str, Any], agent_address: str, services: dict[str, str], grace: float
) -> AsyncIterator[dict[str, str]]:
    """Start the gateways of `settings` (AG-UI, A2A, MCP) in front of the agent at
    `agent_address` and the `services`; yields their URLs by name, and stops them (open
    streams end, interrupting their replies) when the block ends.

    Raises:
        SuiteError: A gateway did not start; the message names it.
    """
    gateways: list[Stoppable] = []
    urls: dict[str, str] = {}
    try:
        for front in GATEWAYS:
            if front in settings:
                gateway, url = await _start_gateway(front, settings[front], agent_address, services)
                gateways.append(gateway)
                urls[front] = url
        yield urls
    finally:
        for gateway in reversed(gateways):
            await gateway.stop(grace)


def resolve_services(config: AgentServiceConfig, services: dict[str, str]) -> AgentServiceConfig:
    """Replace ``"service:NAME"`` middleware params by the started services' addresses.

    Raises:
        SuiteError: A param names a service that does not run.
    """
    entries = []
    for entry in config.middlewares:
        params = getattr(entry, "params", None)
        if params:
            resolved = {}
            for key, value in params.items():
                if isinstance(value, str) and value.startswith("service:"):
                    name = value.removeprefix("service:")
                    if name not in services:
                        raise SuiteError(
                            f"middleware param {key}={value!r}: no service {name!r} runs "
                            f"(configured: {', '.join(services) or 'none'})"
                        )
                    value = services[name]
                resolved[key] = value
            entry = entry.model_copy(update={"params": resolved})
        entries.append(entry)
    return config.model_copy(update={"middlewares": entries})
