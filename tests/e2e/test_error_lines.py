"""Every failure a server reports is one line with a way out, printed once, verbatim: nothing
listening, the wrong service, a value the server refused (exit 2), a missing knowledge base,
a session that does not exist. The servers run in this process on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from tests.e2e.commands import run
from tests.servers import nobody

pytestmark = pytest.mark.timeout(120)

USAGE, FAILURE = 2, 1


@dataclass
class Servers:
    agent: str
    retrieval: str
    nobody: str
    """A loopback port nothing listens on."""


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Servers]:
    agent = await start_agent_service(
        load_config(None, store=f"sqlite:///{tmp_path}/agent.db"), address="127.0.0.1:0"
    )
    retrieval = await start_retrieval_service(
        load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db"), address="127.0.0.1:0"
    )
    try:
        yield Servers(f"127.0.0.1:{agent.port}", f"127.0.0.1:{retrieval.port}", nobody())
    finally:
        await retrieval.stop(None)
        await agent.stop(None)


async def _fails(*args: str) -> tuple[int, str]:
    """The exit status and the stderr of a command that must fail with nothing on stdout."""
    code, out, err = await run(*args)
    assert out == "", out
    return code, err


async def test_nothing_listening_names_the_address_and_the_way_out(servers: Servers) -> None:
    nobody = servers.nobody
    line = f"error: nothing listens on {nobody}: start it with 'hookmesh up' or pass --target\n"
    commands = [
        ("chat", "hi"),
        ("sessions", "list"),
        ("kb", "list"),
        ("memory", "list", "-u", "me"),
    ]
    for command in commands:
        assert await _fails(*command, "--target", nobody) == (FAILURE, line), command
    assert await _fails("say", "hi", "-o", "/tmp/never.wav", "--target", nobody) == (
        FAILURE,
        line.replace("--target\n", "--target, or use --local\n"),
    )


async def test_the_wrong_service_is_named_by_what_it_answers(servers: Servers) -> None:
    retrieval, agent = servers.retrieval, servers.agent
    not_agent = f"error: {retrieval} is not an agent service (it answers RetrievalService)\n"
    assert await _fails("chat", "hi", "--target", retrieval) == (FAILURE, not_agent)
    assert await _fails("sessions", "list", "--target", retrieval) == (FAILURE, not_agent)
    assert await _fails("kb", "list", "--target", agent) == (
        FAILURE,
        f"error: {agent} is not a retrieval service (it answers AdminService, AgentService)\n",
    )


async def test_values_the_server_refuses_are_usage_errors_said_once(servers: Servers) -> None:
    code, _, err = await run("kb", "create", "handbook", "--target", servers.retrieval)
    assert code == 0, err
    assert await _fails("search", "foo", "--top-k", "100", "--target", servers.retrieval) == (
        USAGE,
        "error: top_k: an integer 1-50; got 100 [INVALID_SCHEMA]\n",
    )
    assert await _fails("chat", "hi", "--tool-choice", "nope", "--target", servers.agent) == (
        USAGE,
        "error: options.tool_choice: use auto, none, required or the name of a tool "
        "[INVALID_OPTIONS]\n",
    )
    for command in (("chat", "hi"), ("search", "foo"), ("sessions", "list"), ("voices",)):
        assert await _fails(*command, "--timeout", "-1") == (
            USAGE,
            "error: --timeout must be seconds above 0, not -1\n",
        ), command
    assert await _fails("say", "", "-o", "/tmp/never.wav") == (
        USAGE,
        "error: give the text to say\n",
    )


async def test_a_missing_knowledge_base_is_one_line(servers: Servers, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# A note\n\nHerons stand still.\n")
    assert await _fails("ingest", str(note), "--kb", "nope", "--target", servers.retrieval) == (
        FAILURE,
        "error: there is no knowledge base 'nope': see 'hookmesh kb list', or create it with "
        "'hookmesh kb create' [KNOWLEDGE_BASE_NOT_FOUND]\n",
    )


async def test_a_session_that_does_not_exist_is_refused_unless_asked_for(
    servers: Servers,
) -> None:
    target = ("--target", servers.agent)
    assert await _fails("chat", "hi", "--session", "typo-42", *target) == (
        FAILURE,
        "error: there is no session typo-42: see 'hookmesh sessions list', or start one with "
        "--new-session [SESSION_NOT_FOUND]\n",
    )
    code, out, err = await run("chat", "hi", "--session", "typo-42", "--new-session", *target)
    assert code == 0, err
    assert "session typo-42" in out and "end: completed" in out
    code, out, err = await run("chat", "again", "--session", "typo-42", *target)
    assert code == 0, err
    assert await _fails("chat", "hi", "--session", "typo-42", "--new-session", *target) == (
        FAILURE,
        "error: session typo-42 already exists: drop --new-session to continue it "
        "[SESSION_EXISTS]\n",
    )
    assert await _fails("chat", "--attach", "typo-43", *target) == (
        FAILURE,
        "error: session typo-43 has no reply to watch: see 'hookmesh sessions list' "
        "[REPLY_NOT_FOUND]\n",
    )
