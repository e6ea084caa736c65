"""chat.js asks for the result of each external call a reply paused on (the reply's own, or
a sub-agent's passed up, with who asks) and resumes with it, as `hookmesh chat` does, against
a live agent service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hookmesh.client import AgentClient, SessionInfo
from hookmesh.schema import text_of, tool_results
from hookmesh.services.agent import load_config, start_agent_service
from tests.e2e.test_chat_external import _results
from tests.integration.test_node_client import _CHAT, _Run, _run_node
from tests.node_process import node_binary
from tests.service_tools import confirming_service, external_service

pytestmark = pytest.mark.timeout(60)

_ASK_USER = 'ask_user {"question": "Who?"}: its result (\'!\' first: an error)? '


async def _chat(target: str, message: str, stdin: str = "") -> _Run:
    """chat.js sending `message` in the new session ``s``, fed `stdin`."""
    args = ("--target", target, "--timeout", "15", "--session", "s", "--new-session", message)
    return await _run_node(str(_CHAT), *args, stdin=stdin)


async def _session(target: str) -> SessionInfo:
    async with AgentClient(target, timeout=10) as client:
        return await client.get_session("s")


async def test_chat_js_answers_the_replys_own_external_call(tmp_path: Path) -> None:
    """The model calls the external `ask_user`: chat.js asks for its result (no one else
    asks), resumes with the line as its output, and the model answers after it."""
    node_binary()
    async with external_service(tmp_path, team=False) as target:
        run = await _chat(target, "go", stdin="Ada Lovelace\n")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert '? run ask_user {"question": "Who?"}' in run.stdout
    assert run.stderr == _ASK_USER
    assert "asked by" not in run.stderr
    assert "← ask_user success: Ada Lovelace" in run.stdout
    assert run.stdout.splitlines()[-1] == "end: completed"
    assert session.status == "idle"
    assert _results(session.context) == [("Ada Lovelace", "success")]
    answered = next(i for i, m in enumerate(session.context) if tool_results(m))
    assert text_of(session.context[-1]) == "Thanks." and answered < len(session.context) - 1


async def test_chat_js_gives_an_error_result_for_a_bang_line(tmp_path: Path) -> None:
    """A line starting with ``!`` is an error result: the rest, stripped, is its output."""
    node_binary()
    async with external_service(tmp_path, team=False) as target:
        run = await _chat(target, "go", stdin="! not now \n")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert "← ask_user error: not now" in run.stdout
    assert run.stdout.splitlines()[-1] == "end: completed"
    assert _results(session.context) == [("not now", "error")]


async def test_chat_js_answers_a_workers_external_call_passed_up(tmp_path: Path) -> None:
    """The worker ``scout`` calls `locate`, passed up as ``external_scout``: chat.js asks for
    it as `locate`, naming the worker, and the result reaches the worker, whose answer is
    the supervisor's call's result."""
    node_binary()
    async with external_service(tmp_path, team=True) as target:
        run = await _chat(target, "Where am I?", stdin="Oslo\n")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert "? run external_scout" in run.stdout
    assert run.stderr == (
        'asked by scout: locate {"precision": "city"}: its result (\'!\' first: an error)? '
    )
    assert "← ask_scout success: The user is in Oslo." in run.stdout
    assert run.stdout.splitlines()[-1] == "end: completed"
    assert session.status == "idle"
    assert text_of(session.context[-1]) == "Thanks."
    assert ("The user is in Oslo.", "success") in _results(session.context)


async def test_chat_js_leaves_an_external_pause_paused_at_end_of_input(tmp_path: Path) -> None:
    node_binary()
    async with external_service(tmp_path, team=False) as target:
        run = await _chat(target, "go")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert run.stderr == _ASK_USER
    assert run.stdout.splitlines()[-1] == "end: awaiting_external_execution"
    assert session.status == "awaiting_external_execution"
    assert _results(session.context) == []


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@asynccontextmanager
async def _pausing_again(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model calls the external `ask_user`, then `delete_file`
    (which needs confirmation), then `ask_user` again, then answers "Thanks."."""
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        tools=["tests.service_tools:ask_user", "tests.service_tools:delete_file"],
        models={
            "default": {
                "type": "scripted",
                "turns": [
                    _call("ask_user", question="Who?"),
                    _call("delete_file", path="/tmp/x"),
                    _call("ask_user", question="Where?"),
                    "Thanks.",
                ],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


async def test_chat_js_answers_the_pauses_that_follow_the_results(tmp_path: Path) -> None:
    """After the results the reply pauses again, for a confirmation and then for another
    external call: each is asked about in turn, until the reply ends."""
    node_binary()
    async with _pausing_again(tmp_path) as target:
        run = await _chat(target, "go", stdin="Ada\na\nOslo\n")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert run.stderr == (
        _ASK_USER
        + 'delete_file {"path": "/tmp/x"}: [a]pprove, [e]dit or [r]eject? '
        + 'ask_user {"question": "Where?"}: its result (\'!\' first: an error)? '
    )
    assert run.stdout.splitlines()[-1] == "end: completed"
    assert _results(session.context) == [
        ("Ada", "success"),
        ("deleted /tmp/x", "success"),
        ("Oslo", "success"),
    ]


async def test_chat_js_leaves_a_confirmation_paused_at_end_of_input(tmp_path: Path) -> None:
    """The loop that now also answers external calls still stops at the end of input when
    the reply waits for a confirmation."""
    node_binary()
    async with confirming_service(tmp_path) as target:
        run = await _chat(target, "go")
        session = await _session(target)
    assert run.code == 0, run.stderr
    assert run.stderr == 'delete_file {"path": "/tmp/x"}: [a]pprove, [e]dit or [r]eject? '
    assert run.stdout.splitlines()[-1] == "end: awaiting_confirmation"
    assert session.status == "awaiting_confirmation"
