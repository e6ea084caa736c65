"""Every public module imports on its own, in a fresh interpreter (no import cycles)."""

from __future__ import annotations

import asyncio
import sys

import pytest

MODULES = [
    "hookmesh.schema",
    "hookmesh.schema.agui",
    "hookmesh.errors",
    "hookmesh.agent",
    "hookmesh.middleware",
    "hookmesh.middleware._chain",
    "hookmesh.middleware.builtin.budget",
    "hookmesh.middleware.builtin.tracing",
    "hookmesh.middleware.builtin.rag",
    "hookmesh.middleware.builtin.memory",
    "hookmesh.middleware.builtin.tts",
    "hookmesh.middleware.builtin.agents_md",
    "hookmesh.middleware.builtin.filesystem",
    "hookmesh.middleware.builtin.skills",
    "hookmesh.middleware.builtin.tasks",
    "hookmesh.middleware.builtin.tool_search",
    "hookmesh.remote",
    "hookmesh.server._server",
    "hookmesh.services.agent",
    "hookmesh.services.retrieval",
    "hookmesh.services.memory",
    "hookmesh.services.tts",
    "hookmesh.client",
    "hookmesh.retrieval",
    "hookmesh.memory",
    "hookmesh.cli",
]


@pytest.mark.timeout(120)
async def test_each_module_imports_alone() -> None:
    limit = asyncio.Semaphore(4)

    async def check(module: str) -> tuple[str, int, str]:
        async with limit:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", f"import {module}", stderr=asyncio.subprocess.PIPE
            )
            async with asyncio.timeout(60):
                _, err = await process.communicate()
            return module, process.returncode or 0, err.decode()[-500:]

    results = await asyncio.gather(*(check(m) for m in MODULES))
    failures = [f"{m}: {err}" for m, code, err in results if code != 0]
    assert not failures, "\n".join(failures)
