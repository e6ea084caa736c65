"""`hookmesh chat` asks a person to approve, edit or reject a call the reply paused on."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookmesh.client import AgentClient
from hookmesh.schema import tool_calls, tool_results
from tests.e2e.commands import DEADLINE, run
from tests.service_tools import confirming_service, team_service

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


async def test_both_chats_say_who_asks_for_a_nested_confirmation(tmp_path: Path) -> None:
    """A grandchild's ask pauses the top reply on ``confirm_ops``: each chat prints the
    nested ask under the agents' path, prompts with who asks, and the approval runs it."""
    from tests.node_process import NODE_DIR, node_binary

    python_chat = [sys.executable, "-m", "hookmesh.cli", "chat"]
    node_chat = [node_binary(), str(NODE_DIR / "chat.js")]
    for i, chat in enumerate((python_chat, node_chat)):
        async with team_service(tmp_path / str(i)) as address:
            process = await asyncio.create_subprocess_exec(
                *chat, "--target", address, "clean up",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
            )  # fmt: skip
            async with asyncio.timeout(DEADLINE):
                out, err = (s.decode() for s in await process.communicate(b"a\n"))
            assert process.returncode == 0, (chat, err)
            assert "asked by ops/janitor: confirm_ops " in err, chat
            assert "ops/janitor] asks" in out and "delete_file" in out, chat
            assert "All clean." in out, chat
