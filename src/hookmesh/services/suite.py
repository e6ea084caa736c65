"""Running the suite on loopback: sidecar processes, then the agent service (`hookmesh up`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hookmesh.services.agent import AgentService, AgentServiceConfig, start_agent_service

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0


@dataclass
class Suite:
    """Addresses of everything `start_suite` runs."""

    agent: AgentService
    agent_address: str
    sidecars: dict[str, str] = field(default_factory=dict)
    services: dict[str, str] = field(default_factory=dict)


class _Stoppable(Protocol):
    @property
    def port(self) -> int: ...

    async def stop(self, grace: float | None) -> None: ...


async def _start_service(name: str, overrides: dict[str, Any]) -> _Stoppable:
    """Start a domain service in this process (on 127.0.0.1:0 unless told otherwise)."""
    settings = {"listen": "127.0.0.1:0", **overrides}
    if name == "retrieval":
        from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service

        return await start_retrieval_service(load_retrieval_config(None, **settings))
    if name == "memory":
        from hookmesh.services.memory import load_memory_config, start_memory_service

        return await start_memory_service(load_memory_config(None, **settings))
    from hookmesh.services.tts import load_tts_config, start_tts_service

    return await start_tts_service(load_tts_config(None, **settings))


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
                        raise ValueError(
                            f"middleware param {key}={value!r}: no service {name!r} runs"
                        )
                    value = services[name]
                resolved[key] = value
            entry = entry.model_copy(update={"params": resolved})
        entries.append(entry)
    return config.model_copy(update={"middlewares": entries})


async def _start_sidecar(
    name: str, middleware: str, listen: str
) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "sidecar",
        "--middleware",
        middleware,
        "--listen",
        listen,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            line = (await process.stdout.readline()).decode().strip()
    except TimeoutError:
        line = ""
    if not line.startswith("listening on "):
        process.kill()
        await process.wait()
        raise RuntimeError(f"sidecar {name} ({middleware}) did not start: {line or 'no output'}")
    return process, line.removeprefix("listening on ")


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(_STOP_TIMEOUT):
            await process.wait()
    except TimeoutError:
        process.kill()
        await process.wait()


@asynccontextmanager
async def start_suite(
    config: AgentServiceConfig, *, address: str | None = None
) -> AsyncIterator[Suite]:
    """Start the configured domain services (in this process), every sidecar (each its own
    process), then the agent service.

    Everything stops when the block ends: the agent first (graceful), then the sidecars,
    then the services.
    """
    processes: list[asyncio.subprocess.Process] = []
    sidecars: dict[str, str] = {}
    running: list[_Stoppable] = []
    services: dict[str, str] = {}
    try:
        for name, overrides in config.services.items():
            service = await _start_service(name, overrides)
            running.append(service)
            services[name] = f"127.0.0.1:{service.port}"
        for sidecar in config.sidecars:
            process, sidecar_address = await _start_sidecar(
                sidecar.name, sidecar.middleware, sidecar.listen
            )
            processes.append(process)
            sidecars[sidecar.name] = sidecar_address
        resolved = _resolve(config, services)
        agent = await start_agent_service(resolved, address=address, sidecars=sidecars)
        host = (address or config.listen).rpartition(":")[0]
        try:
            yield Suite(agent, f"{host}:{agent.port}", sidecars, services)
        finally:
            await agent.stop(config.grace_seconds)
    finally:
        await asyncio.gather(*(_stop(p) for p in processes))
        for service in reversed(running):
            await service.stop(config.grace_seconds)
