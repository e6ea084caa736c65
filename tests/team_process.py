"""One agent of a team in a process of its own: an agent service (its YAML config) with an A2A
server in front of it, both on loopback ports the OS picks. Run as
``python -m tests.team_process CONFIG``; it prints ``team listening on <A2A URL>`` once both
serve, and stops both on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from hookmesh._processes import stop_process
from hookmesh.testing import ServerProcess
from hookmesh.tools import tool

READY = "team listening on "
ROOT = Path(__file__).parents[1]
CONFIRMED_ENV = "TEAM_CONFIRMED"
"""The variable naming the file `confirmed_effect` appends to."""


@tool(needs_confirmation=True)
def confirmed_effect(note: str) -> str:
    """Record an effect, once the user confirmed it (one ``confirmed <note>`` line per run).

    Args:
        note: What to record.
    """
    with open(os.environ[CONFIRMED_ENV], "a") as log:
        log.write(f"confirmed {note}\n")
    return f"recorded {note}"


async def _serve(config: Path) -> None:
    from hookmesh.services.a2a import load_a2a_config, start_a2a_server
    from hookmesh.services.agent import load_config, start_agent_service

    service = await start_agent_service(load_config(config), address="127.0.0.1:0")
    try:
        a2a = load_a2a_config(
            None,
            agent=f"127.0.0.1:{service.port}",
            store=f"sqlite:///{config.parent / (config.stem + '-a2a.db')}",
        )
        server = await start_a2a_server(a2a, address="127.0.0.1:0")
        try:
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            print(f"{READY}http://127.0.0.1:{server.port}", flush=True)
            await stop.wait()
        finally:
            await server.stop(0.5)
    finally:
        await service.stop(0.5)


@dataclass
class TeamMember:
    """A running team member."""

    url: str
    """Its A2A server's base URL."""
    process: asyncio.subprocess.Process

    async def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


@asynccontextmanager
async def team_process(
    config: Path, env: dict[str, str] | None = None
) -> AsyncIterator[TeamMember]:
    """Run one team member from `config` until the block ends (SIGTERM)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.team_process", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    try:
        first = await ServerProcess(process, "").line()
        if not first.startswith(READY):
            raise RuntimeError(f"the team member {config.stem} did not start: {first!r}")
        yield TeamMember(first.removeprefix(READY), process)
    finally:
        await stop_process(process, 20.0)


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1])))
