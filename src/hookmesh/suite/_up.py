"""The whole suite on one machine (`hookmesh up`, `hookmesh demo`): the domain services in
this process, each sidecar in its own process, then the agent service."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hookmesh._processes import stop_process
from hookmesh.server import AuthConfig, bound_address, check_free, load_tokens
from hookmesh.services.agent import (
    AgentService,
    AgentServiceConfig,
    SidecarConfig,
    start_agent_service,
)

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0

AGENT_ADDRESS = "127.0.0.1:7000"
SIDECAR_ADDRESS = "127.0.0.1:7001"
RETRIEVAL_ADDRESS = "127.0.0.1:7002"
TTS_ADDRESS = "127.0.0.1:7003"
MEMORY_ADDRESS = "127.0.0.1:7004"
AGUI_ADDRESS = "127.0.0.1:7010"
A2A_ADDRESS = "127.0.0.1:7020"
MCP_ADDRESS = "127.0.0.1:7030"
"""Where `hookmesh up` puts each server, and where every CLI command looks by default."""
GATEWAYS = ("agui", "a2a", "mcp")
"""Services that front others over HTTP: started after the agent, stopped before it."""
DATA_DIR = "hookmesh-data"
"""Where the default suite keeps its SQLite files (relative to the working directory)."""


SUITE_PRINCIPAL = "hookmesh-suite"
"""The principal the suite's own parts use between themselves (a trusted gateway)."""
SUITE_TOKEN_ENV = "HOOKMESH_SUITE_TOKEN"
"""Holds the suite's own token once `secure_suite` ran (inherited by its sidecars)."""
SUITE_TOKENS_ENV = "HOOKMESH_SUITE_TOKENS"
"""Holds every token the suite's servers accept: the users' and the suite's own."""


class SuiteError(Exception):
    """A part of the suite could not start; the message names it and says why."""


@dataclass
class Suite:
    """What `start_suite` runs and where."""

    agent: AgentService
    agent_address: str
    sidecars: dict[str, str] = field(default_factory=dict)
    services: dict[str, str] = field(default_factory=dict)


class _Stoppable(Protocol):
    @property
    def port(self) -> int: ...

    async def stop(self, grace: float | None) -> None: ...


def default_suite_config(data_dir: str | Path = DATA_DIR) -> AgentServiceConfig:
    """The suite `hookmesh up` runs without ``--config``: every service on its own port, data
    under `data_dir`, an audit sidecar, long-term memory, and the scripted model (or the
    OpenAI-compatible server named by ``OPENAI_BASE_URL``, ``OPENAI_MODEL``,
    ``OPENAI_API_KEY``)."""
    from hookmesh.models import openai_model_from_env
    from hookmesh.services.agent import load_config

    data = Path(data_dir)
    models = {"default": openai_model_from_env() or {"type": "scripted"}}
    return load_config(
        None,
        listen=AGENT_ADDRESS,
        store=f"sqlite:///{data / 'agent.db'}",
        models=models,
        middlewares=[
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
                "params": {"target": "service:memory", "mode": "static_control"},
            },
            {"type": "remote", "sidecar": "audit", "failure_mode": "fail_open"},
        ],
        sidecars=[
            {
                "name": "audit",
                "middleware": "hookmesh.suite.demo:AuditTrail",
                "listen": SIDECAR_ADDRESS,
            }
        ],
        services={
            "retrieval": {
                "listen": RETRIEVAL_ADDRESS,
                "store": f"sqlite:///{data / 'retrieval.db'}",
            },
            "tts": {"listen": TTS_ADDRESS},
            "memory": {"listen": MEMORY_ADDRESS, "store": f"sqlite:///{data / 'memory.db'}"},
            "agui": {"listen": AGUI_ADDRESS},
            "a2a": {"listen": A2A_ADDRESS},
            "mcp": {"listen": MCP_ADDRESS},
        },
    )


def secure_suite(config: AgentServiceConfig, auth: dict[str, Any]) -> AgentServiceConfig:
    """`config` with every server checking callers: the tokens `auth` names (``token_env``,
    ``token_file``) map users to principals as usual, and a token made for this run lets
    the suite's parts call each other (the agent its sidecars, the middlewares the
    services, acting for the agent's user as a trusted gateway). Knowledge bases belong to
    the user that creates them (retrieval's `ownership`). TLS in `auth` applies to
    the agent service, the suite's front door; the parts behind it listen on loopback.

    Sets `SUITE_TOKEN_ENV` and `SUITE_TOKENS_ENV` in this process's environment (its
    sidecar processes inherit them).

    Raises:
        ValueError: An unset variable or an unreadable or malformed token file.
    """
    users = load_tokens(
        AuthConfig(token_env=auth.get("token_env"), token_file=auth.get("token_file"))
    )
    own = secrets.token_urlsafe(32)
    os.environ[SUITE_TOKEN_ENV] = own
    entries = [f"{principal}:{token}" for token, principal in users.items()]
    os.environ[SUITE_TOKENS_ENV] = ",".join([*entries, f"{SUITE_PRINCIPAL}:{own}"])
    inner = {"token_env": SUITE_TOKENS_ENV, "trusted_gateways": [SUITE_PRINCIPAL]}
    gateways: dict[str, dict[str, Any]] = {
        "agui": {},
        # Callers' tokens pass through to the agent; the card says a token is needed.
        "a2a": {"require_token": True, "token_env": SUITE_TOKEN_ENV},
        # Callers are checked here, then act as themselves on the services behind.
        "mcp": {"auth": {"token_env": SUITE_TOKENS_ENV}},
        # A user's bases are its own; the agent's RAG reads the bases its config names.
        "retrieval": {
            "auth": inner,
            "ownership": True,
            "access": {SUITE_PRINCIPAL: {"read": ["*"]}},
        },
    }
    services = {
        name: {**overrides, **gateways.get(name, {"auth": inner})}
        for name, overrides in config.services.items()
    }
    middlewares = []
    for entry in config.middlewares:
        params = getattr(entry, "params", None)
        if params and any(isinstance(v, str) and v.startswith("service:") for v in params.values()):
            entry = entry.model_copy(update={"params": {**params, "token_env": SUITE_TOKEN_ENV}})
        elif getattr(entry, "sidecar", ""):
            entry = entry.model_copy(update={"token_env": SUITE_TOKEN_ENV})
        middlewares.append(entry)
    front = {**inner, **{k: v for k, v in auth.items() if k == "tls"}}
    return config.model_copy(
        update={
            "auth": AuthConfig(**front),
            "services": services,
            "middlewares": middlewares,
            "sidecars": [
                s.model_copy(update={"token_env": SUITE_TOKEN_ENV}) for s in config.sidecars
            ],
        }
    )


def describe_model(config: AgentServiceConfig) -> str:
    """One line on the agent's default model, for people starting the suite."""
    model = config.models[config.agent.model]
    if model.type == "scripted":
        return "scripted (offline); set OPENAI_BASE_URL for an OpenAI-compatible server"
    return f"{model.model} at {model.base_url}"


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


async def _start_service(name: str, settings: Any) -> _Stoppable:
    """Start a domain service in this process."""
    if name == "retrieval":
        from hookmesh.services.retrieval import start_retrieval_service

        return await start_retrieval_service(settings)
    if name == "memory":
        from hookmesh.services.memory import start_memory_service

        return await start_memory_service(settings)
    from hookmesh.services.tts import start_tts_service

    return await start_tts_service(settings)


async def _start_gateway(
    name: str, settings: Any, agent_address: str, services: dict[str, str]
) -> tuple[_Stoppable, str]:
    """A gateway in front of the agent (AG-UI, A2A) or the services (MCP) just started, and
    the URL it prints; the addresses it talks to are the ones the suite bound."""
    try:
        if name == "agui":
            from hookmesh.services.agui import start_agui_gateway

            server: _Stoppable = await start_agui_gateway(
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


def _resolve(config: AgentServiceConfig, services: dict[str, str]) -> AgentServiceConfig:
    """Replace ``"service:NAME"`` middleware params by the started services' addresses."""
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


async def _start_sidecar(
    sidecar: SidecarConfig, app_dir: Path | None
) -> tuple[asyncio.subprocess.Process, str]:
    name, middleware, listen = sidecar.name, sidecar.middleware, sidecar.listen
    extra = ["--app-dir", str(app_dir)] if app_dir is not None else []
    if sidecar.token_env:
        extra += ["--token-env", sidecar.token_env]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "sidecar",
        "--middleware",
        middleware,
        "--listen",
        listen,
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
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
async def start_suite(
    config: AgentServiceConfig, *, address: str | None = None, app_dir: Path | None = None
) -> AsyncIterator[Suite]:
    """Start the configured domain services (in this process), every sidecar (each its own
    process), the agent service, then the gateways (AG-UI, A2A, MCP) in front.

    Every fixed address is checked before anything starts, so a second suite fails at once
    without starting half of itself. Everything stops when the block ends: the agent first
    (gracefully), then the sidecars, then the services.

    Args:
        config: The agent config with its ``services`` and ``sidecars``.
        address: The agent's address instead of ``config.listen``.
        app_dir: Where sidecars import user middlewares from.

    Raises:
        SuiteError: A part did not start (a port in use, a missing module, a sidecar that
            exits); the message names the part.
    """
    agent_address = address or config.listen
    settings: dict[str, Any] = {}
    for name, overrides in config.services.items():
        try:
            settings[name] = service_settings(name, overrides)
        except ValueError as exc:
            raise SuiteError(f"services.{name}: {exc}") from None
    try:
        for listen in (
            agent_address,
            *(s.listen for s in settings.values()),
            *(s.grpc_listen for s in settings.values() if getattr(s, "grpc_listen", None)),
            *(s.listen for s in config.sidecars),
        ):
            check_free(listen)
    except OSError as exc:
        raise SuiteError(str(exc)) from None
    processes: list[asyncio.subprocess.Process] = []
    sidecars: dict[str, str] = {}
    running: list[_Stoppable] = []
    services: dict[str, str] = {}
    try:
        for service_name, wanted in settings.items():
            if service_name in GATEWAYS:
                continue
            try:
                service = await _start_service(service_name, wanted)
            except Exception as exc:
                raise SuiteError(f"{service_name} service: {exc}") from exc
            running.append(service)
            services[service_name] = bound_address(wanted.listen, service.port)
        for sidecar in config.sidecars:
            process, sidecar_address = await _start_sidecar(sidecar, app_dir)
            processes.append(process)
            sidecars[sidecar.name] = sidecar_address
        resolved = _resolve(config, services)
        try:
            agent = await start_agent_service(resolved, address=address, sidecars=sidecars)
        except Exception as exc:
            raise SuiteError(f"agent service: {exc}") from exc
        address = bound_address(agent_address, agent.port)
        gateways: list[_Stoppable] = []
        try:
            for front in GATEWAYS:
                if front in settings:
                    gateway, url = await _start_gateway(front, settings[front], address, services)
                    gateways.append(gateway)
                    services[front] = url
            yield Suite(agent, address, sidecars, services)
        finally:
            for gateway in reversed(gateways):  # first: open streams end, interrupting replies
                await gateway.stop(config.grace_seconds)
            await agent.stop(config.grace_seconds)
    finally:
        await asyncio.gather(*(stop_process(p, _STOP_TIMEOUT) for p in processes))
        for service in reversed(running):
            await service.stop(config.grace_seconds)
