"""`hookmesh` servers in processes of their own, for tests and benchmarks: started, read
until their ready line, and stopped as production stops them (SIGTERM, SIGKILL if late)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from hookmesh._processes import stop_process

START_TIMEOUT = 20.0
"""Seconds a server may take to print its ready line, and to stop after SIGTERM."""


@dataclass
class ServerProcess:
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


@asynccontextmanager
async def hookmesh_process(
    *args: str,
    ready: str,
    env: dict[str, str] | None = None,
    unset: Collection[str] = (),
    log: bool = False,
) -> AsyncIterator[ServerProcess]:
    """Run `hookmesh ARGS` until the block ends (SIGTERM, then SIGKILL); its first line
    must be `<ready>HOST:PORT`.

    Args:
        env: Variables set for it, over this process's environment.
        unset: Variables of this process's environment it does not get.
        log: Let its log (stderr) through to this process's stderr instead of dropping it.
    """
    inherited = {k: v for k, v in os.environ.items() if k not in unset}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=None if log else asyncio.subprocess.DEVNULL,
        env={**inherited, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    server = ServerProcess(process, "")
    try:
        first = await server.line()
        if not first.startswith(ready):
            raise RuntimeError(f"hookmesh {args[0]} did not start: {first!r}")
        server.address = first.removeprefix(ready)
        yield server
    finally:
        await stop_process(process, START_TIMEOUT)


@asynccontextmanager
async def agent_process(
    config: Path,
    env: dict[str, str] | None = None,
    app_dir: Path | None = None,
    unset: Collection[str] = (),
    log: bool = False,
) -> AsyncIterator[ServerProcess]:
    """Run `hookmesh serve agent --config <config>` on 127.0.0.1:0 until the block ends
    (`app_dir`: where its tools and middlewares import from; `env`, `unset` and `log` as for
    `hookmesh_process`)."""
    extra = ("--app-dir", str(app_dir)) if app_dir is not None else ()
    async with hookmesh_process(
        "serve", "agent", "--config", str(config), "--listen", "127.0.0.1:0", *extra,
        ready="agent service listening on ", env=env, unset=unset, log=log,
    ) as agent:  # fmt: skip
        yield agent
