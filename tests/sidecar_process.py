"""Starting `hookmesh` servers (a sidecar, an agent service) in their own processes for tests."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 20.0


@dataclass
class SidecarProcess:
    """A running hookmesh server process and its address."""

    process: asyncio.subprocess.Process
    address: str

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    async def line(self, timeout: float = START_TIMEOUT) -> str:
        """The next line the process prints."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            return (await self.process.stdout.readline()).decode().strip()

    async def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


async def stop_process(process: asyncio.subprocess.Process, timeout: float = START_TIMEOUT) -> int:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` s; its exit status."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except TimeoutError:
            process.kill()
    return await process.wait()


@asynccontextmanager
async def hookmesh_process(
    *args: str, ready: str, env: dict[str, str] | None = None
) -> AsyncIterator[SidecarProcess]:
    """Run `hookmesh ARGS` until the block ends (SIGTERM, then SIGKILL); its first line
    must be `<ready>HOST:PORT`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    server = SidecarProcess(process, "")
    try:
        first = await server.line()
        if not first.startswith(ready):
            raise RuntimeError(f"hookmesh {args[0]} did not start: {first!r}")
        server.address = first.removeprefix(ready)
        yield server
    finally:
        await stop_process(process)


@asynccontextmanager
async def sidecar_process(
    middleware: str, *args: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> AsyncIterator[SidecarProcess]:
    """Run `hookmesh sidecar --middleware <middleware>` until the block ends."""
    async with hookmesh_process(
        "sidecar", "--middleware", middleware, "--listen", listen, "--app-dir", str(ROOT), *args,
        ready="listening on ", env=env,
    ) as sidecar:  # fmt: skip
        yield sidecar


@asynccontextmanager
async def agent_process(
    config: Path, env: dict[str, str] | None = None
) -> AsyncIterator[SidecarProcess]:
    """Run `hookmesh serve agent --config <config>` on 127.0.0.1:0 until the block ends."""
    async with hookmesh_process(
        "serve", "agent", "--config", str(config), "--listen", "127.0.0.1:0",
        "--app-dir", str(ROOT), ready="agent service listening on ", env=env,
    ) as agent:  # fmt: skip
        yield agent
