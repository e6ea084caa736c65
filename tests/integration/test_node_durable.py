"""Node's chat.js and its client follow durable replies as `hookmesh chat` does, against a live
agent service: a dropped connection is re-attached by itself (each event once), --attach
follows a running reply, --durability exit makes Ctrl-C interrupt the reply, and both CLIs
print the same line and status for every failure."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookmesh.cli._printer import event_json
from hookmesh.client import AgentClient
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.tts import load_tts_config, start_tts_service
from tests.cut_proxy import cut_proxy
from tests.e2e.commands import ROOT
from tests.e2e.commands import run as run_python
from tests.node_process import NODE_DIR, node_binary, run_node
from tests.servers import nobody as free_address
from tests.servers import serving
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(90)

CHAT = str(NODE_DIR / "chat.js")
SHORT = 20.0
"""Seconds any one step may take."""
PYTHON_CHAT = (sys.executable, "-m", "hookmesh.cli", "chat")


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model calls the test's gate, then answers "done"."""
    node_binary()
    GateState.reset()
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        tools=["tests.service_tools:gate"],
        models={
            "default": {
                "type": "scripted",
                "turns": [{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        GateState.release.set()
        await service.stop(None)


async def _start(*argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )


async def _first_line(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    async with asyncio.timeout(SHORT):
        line = await process.stdout.readline()
    assert line, "the chat printed nothing"
    return json.loads(line)  # type: ignore[no-any-return]


async def _finish(process: asyncio.subprocess.Process) -> tuple[int, list[dict[str, Any]], str]:
    async with asyncio.timeout(SHORT):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, [json.loads(line) for line in out.splitlines()], err.decode()


async def _whole(target: str, session_id: str) -> list[dict[str, Any]]:
    """The reply's lines as the journal has them, from its first event."""
    async with AgentClient(target, timeout=SHORT) as client:
        return [event_json(e) async for e in client.watch(session_id)]


async def test_chat_js_reattaches_by_itself_when_the_connection_drops(agent: str) -> None:
    async with cut_proxy(agent) as proxy:
        chat = await _start(node_binary(), CHAT, "--json", "--target", proxy.address, "go")
        first = await _first_line(chat)
        async with asyncio.timeout(SHORT):
            await GateState.started.wait()
        proxy.cut()  # mid-reply: the stream breaks with UNAVAILABLE and no reason
        GateState.release.set()
        code, rest, err = await _finish(chat)
        assert proxy.connections >= 2  # it came back through the proxy
    assert (code, err) == (0, "")
    whole = await _whole(agent, first["session_id"])
    assert [first, *rest] == whole  # every event once, in order
    assert whole[-1]["finish_reason"] == "FINISH_REASON_COMPLETED"


async def test_attach_follows_a_running_reply_in_both_chats(agent: str) -> None:
    async with AgentClient(agent, timeout=SHORT) as client:
        started = client.reply("go", session_id="s-attach")
        first = await anext(started)
        async with asyncio.timeout(SHORT):
            await GateState.started.wait()
        await started.aclose()  # the caller goes away; a step-durable reply goes on
    chat = await _start(node_binary(), CHAT, "--json", "--target", agent, "--attach", "s-attach")
    attached = await _first_line(chat)
    GateState.release.set()
    code, rest, err = await _finish(chat)
    assert (code, err) == (0, "")
    node = [attached, *rest]
    assert node[0] == event_json(first)
    assert node == await _whole(agent, "s-attach")
    python = await run_python("chat", "--json", "--target", agent, "--attach", "s-attach")
    assert (python[0], [json.loads(line) for line in python[1].splitlines()]) == (0, node)


@pytest.mark.parametrize("durability", ["exit", "step"])
@pytest.mark.parametrize("which", ["node", "python"])
async def test_ctrl_c_interrupts_only_an_exit_reply(
    agent: str, durability: str, which: str
) -> None:
    argv = (node_binary(), CHAT) if which == "node" else PYTHON_CHAT
    session = f"s-{which}-{durability}"
    chat = await _start(
        *argv, "--json", "--target", agent, "--session", session, "--new-session",
        "--durability", durability, "go",
    )  # fmt: skip
    await _first_line(chat)
    async with asyncio.timeout(SHORT):
        await GateState.started.wait()
    chat.send_signal(signal.SIGINT)
    code, _, err = await _finish(chat)
    assert code == 130
    if durability == "exit":
        assert err == f"interrupted; continue with --session {session}\n"
    else:
        assert err == (
            f"interrupted; the reply goes on: follow it with --attach {session}, or continue "
            f"with --session {session}\n"
        )
    GateState.release.set()
    end = (await _whole(agent, session))[-1]
    expected = "FINISH_REASON_INTERRUPTED" if durability == "exit" else "FINISH_REASON_COMPLETED"
    assert end["finish_reason"] == expected


@pytest.fixture
async def tts(tmp_path: Path) -> AsyncIterator[str]:
    """A TTS service: a live server that is not an agent service."""
    async with serving(start_tts_service(load_tts_config(None), address="127.0.0.1:0")) as at:
        yield at


async def test_both_chats_print_the_same_line_and_status_for_each_failure(
    agent: str, tts: str
) -> None:
    nobody = free_address()
    async with AgentClient(agent, timeout=SHORT) as client:
        GateState.release.set()
        assert [e.type async for e in client.reply("go", session_id="taken")][-1] == "reply_end"
    cases = {
        ("--target", nobody, "hi"): (
            1,
            f"error: nothing listens on {nobody}: start it with 'hookmesh up' or pass --target\n",
        ),
        ("--target", tts, "hi"): (
            1,
            f"error: {tts} is not an agent service (it answers TTSService)\n",
        ),
        ("--target", agent, "--session", "typo", "hi"): (
            1,
            "error: there is no session typo: see 'hookmesh sessions list', or start one with "
            "--new-session [SESSION_NOT_FOUND]\n",
        ),
        ("--target", agent, "--session", "taken", "--new-session", "hi"): (
            1,
            "error: session taken already exists: drop --new-session to continue it "
            "[SESSION_EXISTS]\n",
        ),
        ("--target", agent, "--tool-choice", "nope", "hi"): (
            2,
            "error: options.tool_choice: use auto, none, required or the name of a tool "
            "[INVALID_OPTIONS]\n",
        ),
        ("--target", agent, "--attach", "nobody-here"): (
            1,
            "error: session nobody-here has no reply to watch: see 'hookmesh sessions list' "
            "[REPLY_NOT_FOUND]\n",
        ),
    }
    for args, expected in cases.items():
        node = await run_node(node_binary(), CHAT, *args, timeout=SHORT)
        python = await run_python("chat", *args)
        assert (node[0], node[2]) == expected, args
        assert (python[0], python[2]) == expected, args
