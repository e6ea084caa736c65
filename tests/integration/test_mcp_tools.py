"""McpToolsMiddleware against a real MCP server written with the official SDK (tests/mcp_server.py),
over stdio and streamable HTTP: tools, media results, errors, confirmation of destructive tools,
tool-list changes, timeouts, a server that is down, a crashed server leaving no process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, Confirmation, Resume
from hookmesh.middleware.builtin.mcp_tools import (
    WARNING_EVENT,
    McpServerUnavailableError,
    McpToolsMiddleware,
)
from hookmesh.middleware.builtin.mcp_tools._processes import MARKER, running
from hookmesh.schema import MessageKind
from tests.agent_helpers import collect, customs, types
from tests.builtin_helpers import Recorded, calls, documented_parameters, parameters, results
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(90)

SERVER = str(Path(__file__).parents[1] / "mcp_server.py")
WAIT = 20.0


@asynccontextmanager
async def http_server(log: Path) -> AsyncIterator[str]:
    """The test server on streamable HTTP in its own process; yields its URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        SERVER,
        "http",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "MCP_TEST_LOG": str(log), "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(WAIT):
            line = (await process.stdout.readline()).decode().split()
        yield f"http://127.0.0.1:{line[1]}/mcp"
    finally:
        process.kill()
        await process.wait()


@pytest.fixture(params=["stdio", "http"])
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """One server config of each transport; the test server logs what it did to `log`."""
    log = tmp_path / "mcp.log"
    log.touch()
    if request.param == "stdio":
        yield {
            "name": "test",
            "command": sys.executable,
            "args": [SERVER],
            "env": {"MCP_TEST_LOG": str(log)},
            "_log": log,
        }
        return
    async with http_server(log) as url:
        yield {"name": "test", "url": url, "_log": log}


def stdio(log: Path, **extra: Any) -> dict[str, Any]:
    """The test server on stdio, logging to `log`."""
    env = {"MCP_TEST_LOG": str(log)}
    return {"name": "test", "command": sys.executable, "args": [SERVER], "env": env, **extra}


def config(server: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**{k: v for k, v in server.items() if k != "_log"}, **extra}


async def until(mw: McpToolsMiddleware, predicate: Any) -> None:
    """Wait, change by change, until `predicate()` holds."""
    async with asyncio.timeout(WAIT):
        while not predicate():
            await mw.changed()


def read(path: Path) -> str:
    return path.read_text()


def marked_pids() -> list[int]:
    """Every process carrying the MCP server marker."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _has(p, MARKER)]


async def test_tools_run_on_both_kinds_with_media_and_errors(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    await check_tools(kind, attach, stdio(tmp_path / "log"))


async def test_tools_run_over_streamable_http(tmp_path: Path) -> None:
    async with http_server(tmp_path / "log") as url:
        await check_tools("agentic", _in_process, {"name": "test", "url": url})


async def _in_process(mw: Any) -> Any:
    return mw


async def check_tools(kind: MessageKind, attach: Attach, server: dict[str, Any]) -> None:
    async with McpToolsMiddleware([server]) as mw:
        rec = Recorded(
            calls(
                [
                    ("echo", {"text": "hi"}),
                    ("picture", {}),
                    ("report", {}),
                    ("fail", {}),
                ]
            )
        )
        agent = Agent(rec.model, middlewares=[await attach(mw)], kind=kind)
        events = await collect(agent.reply("use the tools"))
        assert events[-1].finish_reason == "completed"
        assert {"echo", "picture", "report", "fail", "delete_file"} <= set(rec.tools[0])
        got = results(agent)
        assert got["call_1"].text == "echo: hi" and got["call_1"].state == "success"
        (image,) = got["call_2"].output
        assert image.type == "image" and image.source.data.startswith(b"\x89PNG")
        assert image.mime_type == "image/png"
        report = got["call_3"].output
        assert [b.type for b in report] == ["text", "audio", "document"]
        assert report[1].mime_type == "audio/wav"
        assert report[2].source.data == b"%PDF-1.7 test" and report[2].name == "file:///report.pdf"
        assert got["call_4"].state == "error" and "the disk is on fire" in got["call_4"].text


async def test_a_destructive_tool_asks_before_it_runs(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    async with McpToolsMiddleware([stdio(log)]) as mw:
        tools = {t.name: t for t in mw.list_tools()}
        assert tools["delete_file"].needs_confirmation and not tools["delete_file"].read_only
        assert not tools["add_note"].needs_confirmation  # destructiveHint false
        assert tools["echo"].read_only and tools["echo"].concurrency_safe
        rec = Recorded(calls([("add_note", {"text": "a"}), ("delete_file", {"path": "/x"})]))
        agent = Agent(rec.model, middlewares=[await attach(mw)], kind=kind)
        events = await collect(agent.reply("clean up"))
        assert events[-1].finish_reason == "awaiting_confirmation"
        (ask,) = [e for e in events if e.type == "require_user_confirm"]
        assert [c.name for c in ask.tool_calls] == ["delete_file"]
        assert read(log) == "note a\n"  # the harmless call ran, the destructive did not
        events = await collect(
            agent.resume(Resume(confirmations=[Confirmation(call_id="call_2", confirmed=True)]))
        )
        assert events[-1].finish_reason == "completed"
        assert read(log) == "note a\ndeleted /x\n"


async def test_confirm_always_and_never_override_the_annotations(tmp_path: Path) -> None:
    servers = [
        stdio(tmp_path / "log", name="a", confirm="always", namespace=True),
        stdio(tmp_path / "log", name="n", confirm="never", namespace=True),
    ]
    async with McpToolsMiddleware(servers) as mw:
        tools = mw.list_tools()
        assert all(t.needs_confirmation for t in tools if t.name.startswith("a__"))
        assert not any(t.needs_confirmation for t in tools if t.name.startswith("n__"))


async def test_a_tool_list_change_reaches_the_next_reply(server: dict[str, Any]) -> None:
    async with McpToolsMiddleware([config(server)]) as mw:
        assert "extra" not in {t.name for t in mw.list_tools()}
        rec = Recorded(calls([("enable_extra", {})]))
        await collect(Agent(rec.model, middlewares=[mw]).reply("more tools"))
        await until(mw, lambda: "extra" in {t.name for t in mw.list_tools()})
        extra = {t.name: t for t in mw.list_tools()}["extra"]
        assert extra.needs_confirmation  # no annotations: MCP presumes it destructive
        rec = Recorded(calls([("extra", {})]))
        agent = Agent(rec.model, middlewares=[mw])
        events = await collect(agent.reply("use it"))
        assert events[-1].finish_reason == "awaiting_confirmation"
        await collect(
            agent.resume(Resume(confirmations=[Confirmation(call_id="call_1", confirmed=True)]))
        )
        assert "extra" in rec.tools[0]
        assert results(agent)["call_1"].text == "extra!"


async def test_a_legacy_session_hears_the_change_too(tmp_path: Path) -> None:
    server = {"name": "old", "command": sys.executable, "args": [SERVER], "protocol": "legacy"}
    async with McpToolsMiddleware([server]) as mw:
        tool = {t.name: t for t in mw.list_tools()}["enable_extra"]
        assert (await anext(tool.run({}))).text == "extra is live"
        await until(mw, lambda: "extra" in {t.name for t in mw.list_tools()})


async def test_allow_deny_and_namespaces(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with http_server(log) as url:
        servers = [
            {"name": "a", "command": sys.executable, "args": [SERVER], "allow": ["echo", "fail"]},
            {"name": "b", "url": url, "deny": ["crash", "delete_file"]},
            {
                "name": "c",
                "command": sys.executable,
                "args": [SERVER],
                "allow": ["picture"],
                "namespace": True,
            },
        ]
        async with McpToolsMiddleware(servers) as mw:
            names = {t.name for t in mw.list_tools()}
            assert {"a__echo", "b__echo", "a__fail", "b__fail", "c__picture", "b__picture"} <= names
            assert "echo" not in names and "crash" not in names and "delete_file" not in names
            assert "add_note" in names  # only b offers it: its own name
            tool = {t.name: t for t in mw.list_tools()}["b__echo"]
            assert (await anext(tool.run({"text": "x"}))).text == "echo: x"


async def test_a_call_that_takes_too_long_is_an_error_result(tmp_path: Path) -> None:
    async with McpToolsMiddleware([stdio(tmp_path / "log", timeout=0.5)]) as mw:
        rec = Recorded(calls([("slow", {"seconds": 30})]))
        agent = Agent(rec.model, middlewares=[mw])
        await collect(agent.reply("wait"), timeout=WAIT)
        result = results(agent)["call_1"]
        assert result.state == "error" and "did not answer within 0.5 s" in result.text


DEAD = {
    "name": "dead",
    "command": sys.executable,
    "args": ["-c", "import sys; sys.exit(1)"],
    "connect_timeout": 5.0,
}


async def test_a_server_that_is_down_fail_open_warns_and_leaves_its_tools_out(
    kind: MessageKind, attach: Attach
) -> None:
    live = {"name": "live", "command": sys.executable, "args": [SERVER], "allow": ["echo"]}
    async with McpToolsMiddleware([live, DEAD], failure_mode="fail_open") as mw:
        assert [t.name for t in mw.list_tools()] == ["echo"]
        rec = Recorded(calls([("echo", {"text": "still here"})]))
        agent = Agent(rec.model, middlewares=[await attach(mw)], kind=kind)
        events = await collect(agent.reply("hi"))
        assert events[-1].finish_reason == "completed"
        (warning,) = [e for e in customs(events) if e.name == WARNING_EVENT]
        assert warning.value["server"] == "dead"
        assert types(events).index("custom") == 1  # right after reply_start, sidecar too
        assert results(agent)["call_1"].text == "echo: still here"


async def test_a_server_that_is_down_fail_closed_refuses_to_start() -> None:
    mw = McpToolsMiddleware([DEAD])
    with pytest.raises(McpServerUnavailableError) as info:
        await mw.start()
    assert info.value.reason == "MCP_SERVER_UNAVAILABLE" and "dead" in info.value.message


async def test_a_crashed_server_leaves_no_process_and_comes_back(tmp_path: Path) -> None:
    log = tmp_path / "log"
    server = stdio(log, name="t")
    async with McpToolsMiddleware([server], retry_seconds=0.2, failure_mode="fail_open") as mw:
        rec = Recorded(calls([("crash", {})]))
        agent = Agent(rec.model, middlewares=[mw])
        await collect(agent.reply("crash"), timeout=WAIT)
        result = results(agent)["call_1"]
        assert result.state == "error" and "closed the connection" in result.text
        child = int(read(log).split()[1])
        await until(mw, lambda: bool(mw.unavailable()))  # the loss is noticed...
        assert not running(child)  # ...after the orphan was killed
        await until(mw, lambda: not mw.unavailable())  # then a new session
        tool = {t.name: t for t in mw.list_tools()}["echo"]
        assert (await anext(tool.run({"text": "back"}))).text == "echo: back"


async def test_closing_stops_the_server_process(tmp_path: Path) -> None:
    log = tmp_path / "log"
    server = stdio(log, name="t")
    mw = McpToolsMiddleware([server])
    await mw.start()
    pids = marked_pids()
    assert pids and all(running(pid) for pid in pids)
    await mw.aclose()
    assert not any(running(pid) for pid in pids)


def _has(proc: Path, marker: str) -> bool:
    try:
        return f"{marker}=".encode() in (proc / "environ").read_bytes()
    except OSError:
        return False


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("mcp_tools.md") == parameters(McpToolsMiddleware)


def test_a_bad_server_config_is_refused() -> None:
    with pytest.raises(ValueError, match="set command"):
        McpToolsMiddleware([{"name": "x"}])
    with pytest.raises(ValueError, match="unique names"):
        McpToolsMiddleware([DEAD, DEAD])
    with pytest.raises(ValueError, match="name: use"):
        McpToolsMiddleware([{"name": "a b", "command": "x"}])


async def test_hookmesh_sidecar_starts_and_closes_it(kind: MessageKind) -> None:
    from hookmesh.remote import RemoteMiddleware
    from tests.sidecar_process import sidecar_process

    async with sidecar_process("tests.mcp_server:middleware") as sidecar:
        remote = await RemoteMiddleware.connect(sidecar.address, timeout=10.0)
        try:
            assert [t.name for t in remote.list_tools()] == ["echo"]
            rec = Recorded(calls([("echo", {"text": "via the sidecar"})]))
            agent = Agent(rec.model, middlewares=[remote], kind=kind)
            await collect(agent.reply("hi"))
            assert results(agent)["call_1"].text == "echo: via the sidecar"
        finally:
            await remote.aclose()
        pids = marked_pids()
        assert pids
    assert not any(running(pid) for pid in pids)  # SIGTERM closed the MCP session


async def test_each_call_sends_its_idempotency_key_in_meta(
    server: dict[str, Any], kind: MessageKind
) -> None:
    """The server reads the call's key in the request's _meta: "<reply id>:<call id>"."""
    from hookmesh.agent import Agent
    from hookmesh.models import ScriptedChatModel, ScriptedTurn

    async with McpToolsMiddleware([config(server)]) as mw:
        turns = [ScriptedTurn(tool_calls=[("request_key", {})]), "done"]
        agent = Agent(ScriptedChatModel(turns), kind=kind, middlewares=[mw])
        events = [e async for e in agent.reply("key?")]
    deltas = [e.text for e in events if e.type == "tool_result_delta"]  # type: ignore[union-attr]
    assert deltas == [f"key: {agent.reply_id}:call_1"]
