"""Retention of the stores beside sessions: the memory service deletes memories not changed
for its `retention.ttl_seconds`, the agent service has its middlewares expire their files
(file memories, offloaded output) past their `retention_seconds`; each at start, by the
clock it is given, keeping what is newer."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hookmesh.client import MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.middleware import user_folder
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(120)

DAY = 86400.0


async def test_the_memory_service_forgets_memories_past_their_retention(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    first = await start_memory_service(
        load_memory_config(None, store=f"sqlite:///{db}"), address="127.0.0.1:0"
    )
    try:
        async with MemoryClient(f"127.0.0.1:{first.port}", timeout=SHORT_TIMEOUT) as memory:
            await memory.add(MemoryScope("alice"), facts=["alice likes tea", "alice has a cat"])
            old = [m.id for m in (await memory.list(MemoryScope("alice"))).memories]
            await memory.add(MemoryScope("alice"), facts=["alice moved to Oslo"])
    finally:
        await first.stop(None)
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "UPDATE documents SET update_time = ? WHERE document_id = ?",
            [((datetime.now(UTC) - timedelta(days=40)).isoformat(), i) for i in old],
        )
    config = load_memory_config(
        None, store=f"sqlite:///{db}", retention={"ttl_seconds": 30 * DAY, "batch": 1}
    )
    ticks: list[datetime] = [datetime.now(UTC)]
    second = await start_memory_service(config, address="127.0.0.1:0", clock=lambda: ticks[-1])
    try:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await second.retention.swept.wait()
        async with MemoryClient(f"127.0.0.1:{second.port}", timeout=SHORT_TIMEOUT) as memory:
            left = (await memory.list(MemoryScope("alice"))).memories
            assert [m.text for m in left] == ["alice moved to Oslo"]
            ticks.append(datetime.now(UTC) + timedelta(days=31))
            assert await second.retention.run_once() == 1
            assert (await memory.list(MemoryScope("alice"))).memories == []
    finally:
        await second.stop(None)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (0,)


def _write(path: Path, text: str, age_days: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    when = (datetime.now(UTC) - timedelta(days=age_days)).timestamp()
    os.utime(path, (when, when))


async def test_the_agent_service_expires_the_middlewares_files(tmp_path: Path) -> None:
    memory_root, offload_root = tmp_path / "memory", tmp_path / "offload"
    alice = memory_root / user_folder("alice")
    head = "---\nname: {0}\ndescription: {0}\ntype: user\n---\n\n{0}\n"
    _write(alice / "old.md", head.format("old"), age_days=10)
    _write(alice / "new.md", head.format("new"), age_days=0)
    _write(
        alice / "MEMORY.md",
        "# Memory index\n- [old](old.md) (user) — old\n- [new](new.md) (user) — new\n",
        age_days=10,
    )
    _write(offload_root / user_folder("alice") / "truncated" / "r1" / "c1.txt", "x", 10)
    _write(offload_root / "truncated" / "r2" / "c2.txt", "y", 10)
    _write(offload_root / "truncated" / "r3" / "c3.txt", "z", 0)
    builtin = "hookmesh.middleware.builtin"
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/sessions.db",
        middlewares=[
            {
                "type": "local",
                "import": f"{builtin}:FileMemoryMiddleware",
                "params": {"root": str(memory_root), "per_user": True, "retention_seconds": DAY},
            },
            {
                "type": "local",
                "import": f"{builtin}:ReductionMiddleware",
                "params": {"root_dir": str(offload_root), "retention_seconds": DAY},
            },
        ],
    )
    agent = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await agent.expiry.swept.wait()
    finally:
        await agent.stop(None)
    assert sorted(p.name for p in alice.iterdir()) == ["MEMORY.md", "new.md"]
    assert (alice / "MEMORY.md").read_text() == "# Memory index\n- [new](new.md) (user) — new\n"
    left = sorted(p.relative_to(offload_root).as_posix() for p in offload_root.rglob("*"))
    assert left == ["truncated", "truncated/r3", "truncated/r3/c3.txt"]
