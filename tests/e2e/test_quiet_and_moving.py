"""What a person sees on a terminal: log lines for people there and JSON elsewhere or when
asked (HOOKMESH_LOG_FORMAT), ingest's bar moving per document with its chunks, help and
answers wrapped to the terminal's width and never hard-wrapped in a pipe."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from tests.e2e.commands import ROOT
from tests.servers import serving
from tests.terminal import on_terminal, plain

pytestmark = pytest.mark.timeout(120)

HOOKMESH = (sys.executable, "-m", "hookmesh.cli")
WARNING = "sidecar 127.0.0.1:9 did not describe itself (UNAVAILABLE): skipped until it does"
"""What an agent with a fail_open sidecar that is down logs as it starts."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKMESH_LOG")}
    return {**env, **extra}


@pytest.fixture
def agent_config(tmp_path: Path) -> Path:
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"listen: 127.0.0.1:0\nstore: sqlite:///{tmp_path}/agent.db\n"
        "middlewares: [{type: remote, target: '127.0.0.1:9', failure_mode: fail_open, "
        "timeout: 1}]\n"
    )
    return config


async def _served_on_a_pipe(config: Path, env: dict[str, str]) -> str:
    """The agent service's stderr when it is no terminal, up to its first log line."""
    process = await asyncio.create_subprocess_exec(
        *HOOKMESH, "serve", "agent", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        async with asyncio.timeout(60):
            return (await process.stderr.readline()).decode()
    finally:
        process.terminate()
        await process.wait()


async def test_log_lines_are_for_people_on_a_terminal_and_json_elsewhere(
    agent_config: Path, tmp_path: Path
) -> None:
    serve = (*HOOKMESH, "serve", "agent", "--config", str(agent_config))
    human = plain(await on_terminal(*serve, columns=200, env=_env(), cwd=tmp_path, until=WARNING))
    assert f"WARNING hookmesh.remote: {WARNING} (fail_open)" in human.splitlines()
    asked = plain(
        await on_terminal(
            *serve, columns=200, env=_env(HOOKMESH_LOG_FORMAT="json"), cwd=tmp_path, until=WARNING
        )
    )
    [line] = [line for line in asked.splitlines() if WARNING in line]
    assert json.loads(line)["message"] == f"{WARNING} (fail_open)"
    piped = json.loads(await _served_on_a_pipe(agent_config, _env()))
    assert (piped["level"], piped["logger"]) == ("WARNING", "hookmesh.remote")
    text = await _served_on_a_pipe(agent_config, _env(HOOKMESH_LOG_FORMAT="text"))
    assert text == f"WARNING hookmesh.remote: {WARNING} (fail_open)\n"


@pytest.fixture
async def retrieval(tmp_path: Path) -> AsyncIterator[str]:
    config = load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db")
    async with serving(start_retrieval_service(config, address="127.0.0.1:0")) as address:
        yield address


async def test_ingest_moves_per_document_and_search_is_never_hard_wrapped(
    retrieval: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for name in ("a", "b", "c"):
        (notes / f"{name}.md").write_text(f"# Note {name}\n\n" + "Herons stand still. " * 40)
    target = ("--target", retrieval)
    created = await on_terminal(*HOOKMESH, "kb", "create", "notes", *target, columns=120,
                                env=_env(), cwd=tmp_path)  # fmt: skip
    assert "created knowledge base notes" in created
    shown = plain(
        await on_terminal(
            *HOOKMESH,
            "ingest",
            "notes",
            "--kb",
            "notes",
            *target,
            columns=120,
            env=_env(),
            cwd=tmp_path,
        )
    )
    frames = re.findall(r"ingesting into notes .*? (\d)/3 documents, (\d+) chunks", shown)
    counts = [int(done) for done, _ in frames]
    assert {1, 2, 3} <= set(counts) and counts == sorted(counts), shown
    chunks = [int(c) for _, c in frames]
    assert chunks == sorted(chunks) and chunks[-1] > chunks[counts.index(1)] > 0
    assert "ingested 3 documents into notes" in shown

    process = await asyncio.create_subprocess_exec(
        *HOOKMESH, "search", "herons", *target,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in _env().items() if k != "COLUMNS"},
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    hits = out.decode().splitlines()
    assert hits[0].startswith("[1] notes/") and len(hits[1]) > 200  # one line per passage


@pytest.mark.parametrize("columns", [60, 160])
async def test_help_wraps_to_the_terminals_width(columns: int) -> None:
    shown = plain(await on_terminal(*HOOKMESH, "chat", "--help", columns=columns, env=_env(),
                                    cwd=ROOT))  # fmt: skip
    widest = max(len(line) for line in shown.splitlines())
    assert columns - 20 < widest <= columns
