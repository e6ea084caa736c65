"""The whole suite on one machine (`hookmesh up`, `hookmesh demo`): the domain services in
this process, each sidecar in its own process, then the agent service."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookmesh.server import AuthConfig, bound_address, load_tokens
from hookmesh.services.agent import AgentService, AgentServiceConfig, start_agent_service
from hookmesh.suite._parts import (
    SuiteError,
    all_service_settings,
    check_addresses,
    resolve_services,
    start_backends,
    start_gateways,
)

AGENT_ADDRESS = "127.0.0.1:7000"
SIDECAR_ADDRESS = "127.0.0.1:7001"
RETRIEVAL_ADDRESS = "127.0.0.1:7002"
TTS_ADDRESS = "127.0.0.1:7003"
MEMORY_ADDRESS = "127.0.0.1:7004"
AGUI_ADDRESS = "127.0.0.1:7010"
A2A_ADDRESS = "127.0.0.1:7020"
MCP_ADDRESS = "127.0.0.1:7030"
"""Where `hookmesh up` puts each server, and where every CLI command looks by default."""
DATA_DIR = "hookmesh-data"
"""Where the default suite keeps its SQLite files (relative to the working directory)."""


SUITE_PRINCIPAL = "hookmesh-suite"
"""The principal the suite's own parts use between themselves (a trusted gateway)."""
SUITE_TOKEN_ENV = "HOOKMESH_SUITE_TOKEN"
"""Holds the suite's own token once `secure_suite` ran (inherited by its sidecars)."""
SUITE_TOKENS_ENV = "HOOKMESH_SUITE_TOKENS"
"""Holds every token the suite's servers accept: the users' and the suite's own."""


@dataclass
class Suite:
    """What `start_suite` runs and where."""

    agent: AgentService
    agent_address: str
    sidecars: dict[str, str] = field(default_factory=dict)
    services: dict[str, str] = field(default_factory=dict)


SUITE_USER = "me"
"""The user the default suite's agent remembers for and its MCP tools act for, while no
tokens name users (the README's ``--user me``)."""


def default_suite_config(data_dir: str | Path = DATA_DIR) -> AgentServiceConfig:
    """The suite `hookmesh up` runs without ``--config``: every service on its own port, data
    under `data_dir`, an audit sidecar, and the demo model (or the OpenAI-compatible server
    named by ``OPENAI_BASE_URL``, ``OPENAI_MODEL``, ``OPENAI_API_KEY``) with what the demo
    model shows: a weather tool, a file deletion that asks for confirmation, a search of the
    ``handbook`` knowledge base, long-term memory of user ``me`` (the README's), and speech
    when the user asks for it."""
    from hookmesh.models import openai_model_from_env
    from hookmesh.services.agent import load_config

    data = Path(data_dir)
    models = {"default": openai_model_from_env() or {"type": "demo"}}
    return load_config(
        None,
        listen=AGENT_ADDRESS,
        store=f"sqlite:///{data / 'agent.db'}",
        models=models,
        tools=["hookmesh.suite.demo:get_weather", "hookmesh.suite.demo:delete_file"],
        middlewares=[
            {"type": "local", "import": "hookmesh.suite.demo:UsageMeter"},
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
                "params": {
                    "target": "service:memory",
                    "mode": "both",
                    "user_id": SUITE_USER,
                    "write_back": False,
                },
            },
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.rag:RAGMiddleware",
                "params": {"knowledge_bases": ["handbook"], "target": "service:retrieval"},
            },
            {
                "type": "local",
                "import": "hookmesh.suite.demo:SpokenAnswers",
                "params": {"target": "service:tts"},
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
            "a2a": {"listen": A2A_ADDRESS, "store": f"sqlite:///{data / 'a2a.db'}"},
            # NOTE(suite): the MCP tools act for the memory middleware's user, so a memory
            # remembered over MCP is the agent's to recall (and `memory ... --user me`'s).
            "mcp": {"listen": MCP_ADDRESS, "user": SUITE_USER},
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
    # NOTE(suite): kept once made, so securing the running suite's config again (a reload of
    # `up --replicas`) keeps the token its running parts accept.
    own = os.environ.get(SUITE_TOKEN_ENV) or secrets.token_urlsafe(32)
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
        # A user's bases are its own; the agent's RAG searches as each reply's user (as a
        # trusted gateway), and as the suite's principal, which reads every base, for none.
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
    if model.type == "demo":
        return (
            'demo (offline, rule based: ask it "what can you do?"); set OPENAI_BASE_URL for '
            "an OpenAI-compatible server"
        )
    if model.type == "scripted":
        return "scripted (offline); set OPENAI_BASE_URL for an OpenAI-compatible server"
    return f"{model.model} at {model.base_url}"


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
    settings = all_service_settings(config)
    check_addresses(config, settings, [agent_address])
    async with start_backends(config, settings, app_dir) as (services, sidecars):
        resolved = resolve_services(config, services)
        try:
            agent = await start_agent_service(resolved, address=address, sidecars=sidecars)
        except Exception as exc:
            raise SuiteError(f"agent service: {exc}") from exc
        address = bound_address(agent_address, agent.port)
        try:
            async with start_gateways(settings, address, services, config.grace_seconds) as fronts:
                yield Suite(agent, address, sidecars, {**services, **fronts})
        finally:
            await agent.stop(config.grace_seconds)
