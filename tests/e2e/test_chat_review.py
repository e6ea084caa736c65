"""`hookmesh chat` asks a person to approve, edit or reject a call the reply paused on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookmesh.client import AgentClient
from hookmesh.schema import tool_calls, tool_results
from tests.e2e.commands import run
from tests.service_tools import confirming_service

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model asks to delete a file, then answers."""
    async with confirming_service(tmp_path) as address:
        yield address


async def test_chat_edits_a_call_after_a_refused_edit(target: str) -> None:
    answers = 'e\n{"path": 1}\nx\ne\n{"path": "/tmp/y"}\n'
    code, out, err = await run(
        "chat", "--target", target, "--session", "s1", "--new-session", "go", stdin=answers
    )
    assert code == 0, err
    assert "paused: require user confirm: delete_file" in out
    assert "confirmations[0].arguments: invalid arguments for delete_file: path" in err
    assert "type a, e or r" in err
    assert "← delete_file success: deleted /tmp/y" in out
    assert out.rstrip().endswith("end: completed")
    async with AgentClient(target, timeout=10) as client:
        session = await client.get_session("s1")
    assert [r.text for m in session.context for r in tool_results(m)] == ["deleted /tmp/y"]
    assert [json.loads(c.arguments) for m in session.context for c in tool_calls(m)] == [
        {"path": "/tmp/y"}
    ]


async def test_chat_leaves_the_reply_paused_at_end_of_input(target: str) -> None:
    code, out, err = await run(
        "chat", "--target", target, "--session", "s2", "--new-session", "go", stdin=""
    )
    assert code == 0, err
    assert "paused: require user confirm" in out
    async with AgentClient(target, timeout=10) as client:
        assert (await client.get_session("s2")).status == "awaiting_confirmation"


async def test_chat_rejects_with_a_reason(target: str) -> None:
    code, out, err = await run(
        "chat",
        "--target",
        target,
        "--session",
        "s3",
        "--new-session",
        "go",
        stdin="r\nnot that file\n",
    )
    assert code == 0, err
    assert "← delete_file denied: The user denied this call: not that file" in out
