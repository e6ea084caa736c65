"""The retrieval commands end to end: `serve retrieval`, `kb`, `ingest` and `search`, each run
as its own process against a running service."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).parents[2]
DEADLINE = 60.0


ENTRY = "hookmesh.cli"


async def run(*args: str, cwd: Path = ROOT) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", ENTRY, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    async with asyncio.timeout(DEADLINE):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    """`hookmesh serve retrieval` on 127.0.0.1:0; yields its address, then Ctrl-C (exit 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", ENTRY, "serve", "retrieval",
        "--listen", "127.0.0.1:0", "--store", f"sqlite:///{tmp_path}/kb.db",
        stdout=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            line = (await process.stdout.readline()).decode().strip()
        assert line.startswith("retrieval service listening on 127.0.0.1:"), line
        yield line.split()[-1]
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_create_ingest_search_list_delete(server: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "vacation.md").write_text(
        "# Vacation policy\n\nFull-time employees get 25 days of paid vacation per year.\n"
    )
    (docs / "expenses.txt").write_text("Submit travel expenses within 30 days with receipts.")
    (docs / "scan.pdf").write_bytes(b"%PDF-1.4 not read")
    (docs / ".hidden").write_text("ignored")
    target = ("--target", server)

    code, out, err = await run("kb", "create", "handbook", "--description", "Policies", *target)
    assert code == 0, err
    assert out.startswith("created knowledge base handbook (chunks 128/32 tokens")
    code, _, err = await run("kb", "create", "handbook", *target)
    assert code == 1 and "KNOWLEDGE_BASE_EXISTS" in err

    code, out, err = await run(
        "ingest", "docs", "--kb", "handbook", "--batch", "1", *target, cwd=tmp_path
    )
    assert code == 0, err
    assert out.strip() == (
        "ingested 2 documents into handbook (0 unchanged, 2 chunks written); 0 failed, 1 skipped"
    )
    assert "skipped docs/scan.pdf" in err and ".hidden" not in err
    code, out, _ = await run("ingest", "docs", "--kb", "handbook", *target, cwd=tmp_path)
    assert code == 0 and "(2 unchanged, 0 chunks written)" in out

    code, out, err = await run("kb", "list", "--json", *target)
    assert code == 0, err
    [kb] = [json.loads(line) for line in out.splitlines()]
    assert (kb["name"], kb["documents"], kb["description"]) == ("handbook", 2, "Policies")
    code, out, _ = await run("kb", "list", *target)
    assert code == 0 and "handbook" in out and "Policies" in out

    query = "how many vacation days do I get"
    code, out, err = await run(
        "search", query, "--kb", "handbook", "--top-k", "1", "--json", *target
    )
    assert code == 0, err
    [hit] = [json.loads(line) for line in out.splitlines()]
    assert (hit["rank"], hit["document_id"], hit["chunk_id"]) == (
        1,
        "docs/vacation.md",
        "docs/vacation.md#0",
    )
    assert hit["metadata"] == {
        "title": "Vacation policy",
        "source": "docs/vacation.md",
        "format": "markdown",
    }
    code, out, _ = await run("search", "receipts", "--mode", "lexical", *target)
    assert code == 0 and out.startswith("[1] handbook/docs/expenses.txt#0 score ")

    code, _, err = await run("search", query, "--kb", "nope", *target)
    assert code == 1 and "KNOWLEDGE_BASE_NOT_FOUND" in err
    code, _, err = await run("search", query, "--mode", "fuzzy", *target)
    assert code == 2 and "dense, lexical, hybrid" in err

    code, out, _ = await run("kb", "delete", "handbook", *target)
    assert code == 0 and out.strip() == "deleted knowledge base handbook"
    code, out, _ = await run("kb", "list", *target)
    assert code == 0 and out.strip() == "no knowledge bases"


async def test_ingest_reports_failures_and_bad_usage(server: str, tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("A fine note about herons.")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe not utf-8 \xff")
    target = ("--target", server)
    code, _, err = await run("kb", "create", "notes", *target)
    assert code == 0, err
    code, out, err = await run(
        "ingest", "good.txt", "bad.txt", "--kb", "notes", *target, cwd=tmp_path
    )
    assert code == 1
    assert "unreadable bad.txt" in err
    assert "ingested 1 documents into notes" in out and "1 failed" in out
    code, _, err = await run("ingest", "missing.txt", "--kb", "notes", *target, cwd=tmp_path)
    assert code == 2 and "no such file or directory" in err
    code, _, err = await run("ingest", "good.txt", "--kb", "nope", *target, cwd=tmp_path)
    assert code == 1 and "KNOWLEDGE_BASE_NOT_FOUND" in err


async def test_commands_without_a_service_fail_cleanly() -> None:
    code, _, err = await run("kb", "list", "--target", "127.0.0.1:1", "--timeout", "2")
    assert code == 1 and err.startswith("error: nothing listens on 127.0.0.1:1: ")
