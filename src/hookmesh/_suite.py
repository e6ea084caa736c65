"""Running the suite on loopback: sidecar processes, then the agent service (`hookmesh up`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from hookmesh.services.agent import AgentService, AgentServiceConfig, start_agent_service

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0


@dataclass
class Suite:
    """Addresses of everything `start_suite` runs."""

    agent: AgentService
    agent_address: str
    sidecars: dict[str, str] = field(default_factory=dict)


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
    """Start every configured sidecar (each its own process), then the agent service.

    Everything stops when the block ends: the agent first (graceful), then the sidecars.
    """
    processes: list[asyncio.subprocess.Process] = []
    sidecars: dict[str, str] = {}
    try:
        for sidecar in config.sidecars:
            process, sidecar_address = await _start_sidecar(
                sidecar.name, sidecar.middleware, sidecar.listen
            )
            processes.append(process)
            sidecars[sidecar.name] = sidecar_address
        agent = await start_agent_service(config, address=address, sidecars=sidecars)
        host = (address or config.listen).rpartition(":")[0]
        try:
            yield Suite(agent, f"{host}:{agent.port}", sidecars)
        finally:
            await agent.stop(config.grace_seconds)
    finally:
        await asyncio.gather(*(_stop(p) for p in processes))
