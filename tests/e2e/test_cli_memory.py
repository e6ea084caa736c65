"""`hookmesh memory add|search|list|delete` and `hookmesh serve memory`, each run as its own
process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookmesh.services.memory import MemoryService, load_memory_config, start_memory_service
from hookmesh.testing import hookmesh_process
from tests.e2e import commands
from tests.e2e.commands import DEADLINE

pytestmark = pytest.mark.timeout(120)


async def run(*args: str, timeout: float = DEADLINE) -> tuple[int, str, str]:
    return await commands.run(*args, timeout=timeout)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MemoryService]:
    config = load_memory_config(None, store=f"sqlite:///{tmp_path}/memory.db")
    running = await start_memory_service(config, address="127.0.0.1:0")
    try:
        yield running
    finally:
        await running.stop(None)


async def test_add_search_list_delete(service: MemoryService) -> None:
    target = ("--target", f"127.0.0.1:{service.port}")
    code, out, err = await run(
        "memory", "add", "The user is vegetarian.", "The user lives in Lisbon.",
        "--user", "alice", "--meta", "source=cli", "--meta", "n=3", *target,
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["created", "created"]
    veg_id = lines[0].split()[1]
    code, out, _ = await run("memory", "add", "The user is a vegetarian.", "-u", "alice", *target)
    assert out.split()[:2] == ["merged", veg_id]
    code, out, err = await run("memory", "search", "what does the user eat", "-u", "alice", *target)
    assert code == 0 and out.splitlines()[0].endswith(f"{veg_id}  The user is vegetarian."), err
    code, raw, _ = await run(
        "memory", "search", "what does the user eat", "-u", "alice", "--json", *target
    )  # fmt: skip
    top = json.loads(raw.splitlines()[0])
    # Both figures are labelled and match the --json fields of the same hit.
    label = f" 1. similarity {top['similarity']:.3f}  score {top['score']:.4f}  {veg_id}"
    assert out.splitlines()[0].startswith(label)
    code, out, _ = await run("memory", "list", "-u", "alice", "--json", *target)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in rows] == ["The user is vegetarian.", "The user lives in Lisbon."]
    assert rows[0]["metadata"] == {"source": "cli", "n": 3} and rows[0]["user_id"] == "alice"
    code, out, err = await run("memory", "list", "-u", "alice", "--page-size", "1", *target)
    assert len(out.splitlines()) == 1 and "--page-token" in err
    code, out, _ = await run("memory", "delete", veg_id, "-u", "alice", *target)
    assert (code, out.strip()) == (0, f"deleted {veg_id}")
    code, _, err = await run("memory", "delete", veg_id, "-u", "alice", *target)
    assert code == 1 and "[MEMORY_NOT_FOUND]" in err
    code, _, err = await run("memory", "search", " ", "-u", "", "--top-k", "99", *target)
    assert code == 2 and "[INVALID_SCHEMA]" in err and "scope.user_id" in err
    code, out, _ = await run("memory", "delete", "--all", "-u", "alice", *target)
    assert (code, out.strip()) == (0, "deleted 1 memories")


async def test_serve_until_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "memory.yaml"
    config.write_text(f"store: sqlite:///{tmp_path}/memory.db\ndedup_threshold: 0.9\n")
    async with hookmesh_process(
        "serve", "memory", "--config", str(config), "--listen", "127.0.0.1:0",
        ready="memory service listening on ",
    ) as server:  # fmt: skip
        assert server.address.startswith("127.0.0.1:")
        code, out, err = await run("memory", "add", "The user owns a kayak.", "-u", "kim",
                                   "--target", server.address)  # fmt: skip
        assert code == 0 and out.startswith("created"), err
    assert server.process.returncode == 0  # a clean stop at SIGTERM
