"""This checkout's `hookmesh` servers in their own processes (`hookmesh.testing`), importing
the tests' middlewares and tools from the repository root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from hookmesh.testing import ServerProcess, hookmesh_process
from hookmesh.testing import agent_process as _agent_process

ROOT = Path(__file__).resolve().parents[1]


@asynccontextmanager
async def sidecar_process(
    middleware: str, *args: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    """Run `hookmesh sidecar --middleware <middleware>` until the block ends."""
    async with hookmesh_process(
        "sidecar", "--middleware", middleware, "--listen", listen, "--app-dir", str(ROOT), *args,
        ready="listening on ", env=env,
    ) as sidecar:  # fmt: skip
        yield sidecar


@asynccontextmanager
async def agent_process(
    config: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    """Run `hookmesh serve agent --config <config>` on 127.0.0.1:0 until the block ends."""
    async with _agent_process(config, env, app_dir=ROOT) as agent:
        yield agent
