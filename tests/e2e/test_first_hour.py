"""The README's first hour, run as written: `hookmesh up` with no config on the default ports
(the demo model), then every command of the README's second block against it — a tool call,
a cited search, a memory recall, a confirmation and speech among them — a second `up` refused
in one line, and Ctrl-C leaving a clean log."""

from __future__ import annotations

import asyncio
import re
import shlex
import wave
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.e2e.commands import DEADLINE, ROOT, run, start_up

pytestmark = pytest.mark.timeout(300)

README = (ROOT / "README.md").read_text()
NOISE = (
    "Traceback",
    "Task was destroyed",
    "Failed to detach",
    "already running",
    "too_many_pings",
    "Exception ignored",
)
"""What must never appear in a service's log during normal use, cancel or shutdown."""


def first_hour_commands() -> tuple[list[str], list[list[str]]]:
    """The `up` block and the commands block of the README's "The first hour" section."""
    section = README.split("## The first hour", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2, "the first hour shows an `up` block and a commands block"

    def commands(block: str) -> list[list[str]]:
        lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
        return [shlex.split(line) for line in lines if line and not line.startswith("source")]

    up = commands(blocks[0])
    assert up == [["hookmesh", "up"]]
    return up[0], commands(blocks[1])


async def test_the_readme_first_hour_as_written(tmp_path: Path) -> None:
    up, commands = first_hour_commands()
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    suite = await start_up(*up[2:], cwd=tmp_path)
    outputs: dict[str, str] = {}
    """Each command's stdout, by its words after `hookmesh` (unquoted)."""
    try:
        assert suite.addresses == {
            "agent": "127.0.0.1:7000",
            "sidecar audit": "127.0.0.1:7001",
            "retrieval": "127.0.0.1:7002",
            "tts": "127.0.0.1:7003",
            "memory": "127.0.0.1:7004",
            "agui": "http://127.0.0.1:7010/",
            "a2a": "http://127.0.0.1:7020/.well-known/agent-card.json",
            "mcp": "http://127.0.0.1:7030/mcp",
        }
        for command in commands:
            assert command[0] == "hookmesh"
            code, out, err = await run(*command[1:], cwd=tmp_path)
            assert code == 0, f"{shlex.join(command)} exited {code}: {err}"
            outputs[" ".join(command[1:])] = out

        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            card = (await http.get(suite.addresses["a2a"])).json()
        async with (
            asyncio.timeout(DEADLINE),
            Client(suite.addresses["mcp"], cache=None) as mcp,
        ):
            found = await mcp.call_tool("search_knowledge", {"query": "sidecar authenticate"})
        again = await run("up", cwd=tmp_path)
        assert again[0] == 1
        assert again[2] == "error: address 127.0.0.1:7000 is already in use\n"
    finally:
        code, log = await suite.stop()
    assert code == 0, log
    assert not [n for n in NOISE if n in log], log

    for name in ("agent", "sidecar audit", "retrieval", "tts", "memory", "agui", "a2a", "mcp"):
        assert re.search(rf"^{name} +\S+ +serving$", outputs["status"], flags=re.M), name
    chats = {k.removeprefix("chat "): v for k, v in outputs.items() if k.startswith("chat ")}
    assert all("end: completed" in out or "end: awaiting_confirmation" in out
               for out in chats.values()), chats  # fmt: skip
    assert "I am hookmesh's demo model" in chats["Hello, what can you do?"]
    weather = chats["What's the weather in Oslo?"]
    assert "→ get_weather" in weather and "← get_weather success: -3 °C, snow" in weather
    assert "It is -3 °C, snow in Oslo." in weather
    cited = chats["How does a sidecar authenticate?"]
    assert "→ search_knowledge" in cited
    assert re.search(r"\[1\]\n\nSources: \[1\] handbook/docs/\S+\.md", cited), cited
    recalled = chats["What do I like to drink?"]
    assert (
        "[hint from memory]" in recalled and "You told me: The user prefers green tea." in recalled
    )
    confirm = chats["Delete the file notes.txt"]
    assert "paused: require user confirm: delete_file" in confirm
    assert "end: awaiting_confirmation" in confirm
    spoken = chats["Say hello out loud --speak hi.wav"]
    assert "Hello." in spoken and "[data audio/pcm;rate=22050;channels=1 speech]" in spoken
    sessions = outputs["sessions list"]
    for out in chats.values():
        session = re.search(r"session (\w+)", out)
        assert session is not None and session.group(1) in sessions
    for name in ("hello.wav", "hi.wav"):
        with wave.open(str(tmp_path / name)) as wav:
            assert wav.getnframes() > wav.getframerate() // 4  # speech, not silence
    assert "created knowledge base handbook" in outputs["kb create handbook"]
    assert re.search(
        r"ingested [1-9]\d* documents into handbook", outputs["ingest docs --kb handbook"]
    )
    assert "[1] handbook/" in outputs["search how does a sidecar authenticate"]
    assert "green tea" in outputs["memory search what does the user drink --user me"]
    # The gateways front the same suite: the agent's card, the handbook through MCP.
    assert card["name"] == "assistant" and card["skills"]
    assert not found.is_error and "handbook/" in found.content[0].text  # type: ignore[union-attr]
    assert (tmp_path / "hookmesh-data" / "agent.db").is_file()
