"""`hookmesh chat` asks a person for the result of each external call the reply paused on
(the reply's own, or a sub-agent's passed up, with who asks) and resumes with it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from hookmesh.client import AgentClient
from hookmesh.schema import Message, text_of, tool_results
from tests.e2e.commands import run
from tests.service_tools import external_service

pytestmark = pytest.mark.timeout(120)


def _results(context: Sequence[Message]) -> list[tuple[str, str]]:
    return [(r.text, r.state) for m in context for r in tool_results(m)]


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_chat_answers_a_workers_external_call_passed_up(tmp_path: Path, kind: str) -> None:
    """The worker ``scout`` calls `locate`: chat asks for its result naming the worker and
    the tool to run, and the result reaches the worker, whose answer is the call's result."""
    async with external_service(tmp_path, team=True, kind=kind) as target:
        code, out, err = await run(
            "chat", "--target", target, "--session", "s", "--new-session", "Where am I?",
            stdin="Oslo\n",
        )  # fmt: skip
        async with AgentClient(target, timeout=10) as client:
            session = await client.get_session("s")
    assert code == 0, err
    assert "paused: require external execution: external_scout" in out
    assert 'asked by scout: locate {"precision": "city"}: its result' in err
    assert "← ask_scout success: The user is in Oslo." in out
    assert out.rstrip().endswith("end: completed")
    assert session.status == "idle"
    assert text_of(session.context[-1]) == "Thanks."
    assert ("The user is in Oslo.", "success") in _results(session.context)


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_chat_answers_the_replys_own_external_call(tmp_path: Path, kind: str) -> None:
    """The model calls the external `ask_user` itself: chat asks for its result (no one
    else asks), and ``!`` makes it an error result."""
    async with external_service(tmp_path, team=False, kind=kind) as target:
        code, out, err = await run(
            "chat", "--target", target, "--session", "s", "--new-session", "go",
            stdin="!not now\n",
        )  # fmt: skip
        async with AgentClient(target, timeout=10) as client:
            session = await client.get_session("s")
    assert code == 0, err
    assert 'ask_user {"question": "Who?"}: its result' in err and "asked by" not in err
    assert out.rstrip().endswith("end: completed")
    assert _results(session.context) == [("not now", "error")]


async def test_chat_leaves_an_external_pause_paused_at_end_of_input(tmp_path: Path) -> None:
    async with external_service(tmp_path, team=True) as target:
        code, out, err = await run(
            "chat", "--target", target, "--session", "s", "--new-session", "go", stdin=""
        )
        async with AgentClient(target, timeout=10) as client:
            status = (await client.get_session("s")).status
    assert code == 0, err
    assert "paused: require external execution: external_scout" in out
    assert "its result" in err
    assert status == "awaiting_external_execution"
