"""What the team integration tests stand up: team members' configs for `tests.team_process`,
and a replicated agent (two `hookmesh serve agent` processes on one PostgreSQL schema, behind
the shipped Envoy config)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from hookmesh.schema import AgentEvent
from hookmesh.testing import EnvoyProxy, ServerProcess, hookmesh_process
from tests.envoy import CONFIG as ENVOY_CONFIG
from tests.session_backends import postgres_schema
from tests.sidecar_process import ROOT


def member(
    folder: Path, name: str, turns: list[Any], middlewares: list[Any], per_reply: bool = False
) -> Path:
    """Write the config of team member `name` (scripted `turns`, SQLite stores in `folder`, the
    record_effect and confirmed_effect tools) and return its path."""
    path = folder / f"{name}.yaml"
    model = {"type": "scripted", "turns": turns, "repeat": False, "per_reply": per_reply}
    config = {
        "store": f"sqlite:///{folder / name}.db",
        "grace_seconds": 0.5,
        "agent": {"name": name, "description": f"The {name} agent."},
        "models": {"default": model},
        "tools": ["tests.durable_app:record_effect", "tests.team_process:confirmed_effect"],
        "middlewares": middlewares,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def asks(peer: str, url: str) -> dict[str, Any]:
    """The middleware config entry that makes remote agent `peer` (A2A at `url`) a tool."""
    return {
        "type": "local",
        "import": "hookmesh.middleware.builtin.remote_agent:RemoteAgentMiddleware",
        "params": {"agents": [{"name": peer, "url": url}]},
    }


@asynccontextmanager
async def replicas(
    postgres_url: str, folder: Path, agent: dict[str, Any], env: dict[str, str]
) -> AsyncIterator[tuple[list[ServerProcess], EnvoyProxy]]:
    """Two replicas of the agent `agent` configures (its agent, models, tools and middlewares
    keys) on one fresh PostgreSQL schema, behind Envoy; `env` is set for both."""
    async with AsyncExitStack() as stack:
        backend = await stack.enter_async_context(postgres_schema(postgres_url))
        path = folder / "agent.yaml"
        path.write_text(yaml.safe_dump({**backend.config(), "grace_seconds": 0.5, **agent}))
        args = ["serve", "agent", "--config", str(path), "--listen", "127.0.0.1:0"]
        args += ["--app-dir", str(ROOT)]
        ready = "agent service listening on "
        running = [
            await stack.enter_async_context(hookmesh_process(*args, ready=ready, env=env))
            for _ in range(2)
        ]
        envoy = await stack.enter_async_context(
            EnvoyProxy({"agent": [r.address for r in running]}, ENVOY_CONFIG)
        )
        yield running, envoy


async def drain(stream: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    """Every event of `stream`, to its end."""
    return [event async for event in stream]
