"""Starting a `hookmesh sidecar` in its own process for tests."""

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
    """A running sidecar process and its address."""

    process: asyncio.subprocess.Process
    address: str

    async def line(self, timeout: float = START_TIMEOUT) -> str:
        """The next line the sidecar prints."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            return (await self.process.stdout.readline()).decode().strip()

    async def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


@asynccontextmanager
async def sidecar_process(
    middleware: str, *args: str, listen: str = "127.0.0.1:0"
) -> AsyncIterator[SidecarProcess]:
    """Run `hookmesh sidecar --middleware <middleware>` until the block ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "sidecar",
        "--middleware",
        middleware,
        "--listen",
        listen,
        "--app-dir",
        str(ROOT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    sidecar = SidecarProcess(process, "")
    try:
        first = await sidecar.line()
        if not first.startswith("listening on "):
            raise RuntimeError(f"sidecar did not start: {first!r}")
        sidecar.address = first.removeprefix("listening on ")
        yield sidecar
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(START_TIMEOUT):
                    await process.wait()
            except TimeoutError:
                await sidecar.kill()
