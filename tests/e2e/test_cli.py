"""The `hookmesh` command end to end, each run as its own process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.commands import DEADLINE, ROOT, run, start_up

pytestmark = pytest.mark.timeout(120)


async def test_demo_shows_middlewares_grounding_recall_and_a_handoff() -> None:
    code, out, err = await run("demo")
    assert code == 0, err
    first, rest = out.split("session 2 — you:")
    second, third = rest.split("session 3 — you:")
    assert "→ get_weather" in first
    assert "It is -3 °C, snow in Oslo. From the notes: Below freezing" in first
    assert "Sources: [1] wardrobe/snow" in first
    assert "[audit_trail (sidecar)]" in first
    assert "[usage_meter (in-process)]" in first
    assert "[hint from rag]" in first and "(wardrobe/snow)" in first
    # Only recall can show the fact the extraction model made of session 1 ("The user is
    # vegetarian.", not the user's words nor the scripted answer's), as a memory hint of
    # session 2; session 1 had nothing to recall yet.
    assert "[hint from memory]" not in first
    [recalled] = [line for line in second.splitlines() if "[hint from memory]" in line]
    assert recalled.endswith("- The user is vegetarian.")
    assert "You told me before: The user is vegetarian." in second
    # The third is handed off: the chef's words stream nested under the transfer call.
    assert "→ transfer_to_chef" in third
    assert "    [chef] Chef here. Mushrooms love butter" in third
    assert "    [chef] ended: completed" in third
    assert out.count("end: completed") == 3


async def test_up_then_chat_then_ctrl_c(tmp_path: Path) -> None:
    config = tmp_path / "hookmesh.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
tools: [hookmesh.suite.demo:get_weather]
models:
  default:
    type: scripted
    turns:
      - tool_calls: [{{name: get_weather, arguments: {{city: Lisbon}}}}]
      - Sunny in Lisbon.
middlewares:
  - {{type: remote, sidecar: audit}}
sidecars:
  - {{name: audit, middleware: "hookmesh.suite.demo:AuditTrail"}}
"""
    )
    suite = await start_up("--config", str(config))
    try:
        assert set(suite.addresses) == {"agent", "sidecar audit"}
        code, out, err = await run(
            "chat", "--target", suite.addresses["agent"], "--json", "weather in Lisbon?"
        )
        assert code == 0, err
        events = [json.loads(line) for line in out.splitlines()]
        assert events[0]["type"] == "reply_start"
        assert any(e["type"] == "custom" and e["name"] == "audit_trail (sidecar)" for e in events)
        assert (
            "".join(e.get("delta", "") for e in events if e["type"] == "text_block_delta")
            == "Sunny in Lisbon."
        )
        assert events[-1]["type"] == "reply_end"
        assert events[-1]["finish_reason"] == "FINISH_REASON_COMPLETED"
    finally:
        code, err = await suite.stop()
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"note: {config} has no `services:`, so only the agent and its sidecars run (no "
        "retrieval, memory, TTS or gateways; add them as docs/config.md shows, or run "
        "`hookmesh up` without --config)"
    )


async def test_bad_usage_is_reported_not_crashed() -> None:
    code, _, err = await run(
        "sidecar", "--middleware", "no_such_module:Thing", "--listen", "127.0.0.1:0"
    )
    assert code == 2
    assert "cannot load 'no_such_module:Thing'" in err
    code, _, err = await run("sidecar", "--middleware", "x:y", "--listen", "nonsense")
    assert code == 2 and "is not host:port" in err


async def test_chat_with_nobody_there_fails_cleanly() -> None:
    code, _, err = await run("chat", "--target", "127.0.0.1:1", "--timeout", "2", "hello")
    assert code == 1
    assert err == (
        "error: nothing listens on 127.0.0.1:1: start it with 'hookmesh up' or pass --target\n"
    )


async def test_a_failed_reply_exits_1_and_the_interactive_chat_goes_on(tmp_path: Path) -> None:
    config = tmp_path / "hookmesh.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
middlewares:
  - {{type: local, import: "tests.middlewares:Exploder", params: {{hook: on_model_call}}}}
"""
    )
    suite = await start_up("--config", str(config))
    target = ("--target", suite.addresses["agent"])
    try:
        code, out, err = await run("chat", *target, "hello")
        assert code == 1
        assert "end: error" in out
        assert err == (
            "error: MIDDLEWARE_FAILED: middleware exploder-on_model_call failed: "
            "boom in on_model_call\n"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hookmesh.cli", "chat", *target,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            out_bytes, err_bytes = await process.communicate(b"first\n\nsecond\n")
        assert process.returncode == 1
        assert err_bytes.decode().count("error: MIDDLEWARE_FAILED") == 2
        assert out_bytes.decode().count("end: error") == 2
    finally:
        code, log = await suite.stop()
    assert code == 0, log


async def test_demo_serve_prints_the_chat_page_url_and_stops_on_ctrl_c() -> None:
    demo = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "demo", "--serve",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert demo.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            while not (line := (await demo.stdout.readline()).decode()).startswith("chat page:"):
                assert line, "the demo ended without printing the chat page's URL"
        url = line.split()[2]
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            page = await http.get(url)
            health = await http.get(url + "healthz")
        assert page.status_code == 200 and "<title>hookmesh chat</title>" in page.text
        assert health.json() == {"status": "serving"}
    finally:
        if demo.returncode is None:
            demo.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await demo.wait() == 0


async def test_both_chat_clients_stop_quietly_when_the_reader_goes_away(tmp_path: Path) -> None:
    """`chat --json | head -1`: the reply is far larger than the pipe holds, so the client
    writes after `head` has gone; it stops with status 0 and nothing on stderr."""
    from hookmesh.services.agent import load_config, start_agent_service
    from tests.node_process import NODE_DIR, node_binary

    long_text = "word " * 200_000
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        models={"default": {"type": "scripted", "turns": [long_text], "chunk_size": 1000}},
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{service.port}"
    python_chat = f"{sys.executable} -m hookmesh.cli chat"
    node_chat = f"{node_binary()} {NODE_DIR / 'chat.js'}"
    try:
        for chat in (python_chat, node_chat):
            shell = await asyncio.create_subprocess_exec(
                "bash", "-c", f"set -o pipefail; {chat} --json --target {target} hi | head -1",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(DEADLINE):
                out, err = await shell.communicate()
            assert (shell.returncode, err.decode()) == (0, ""), chat
            assert json.loads(out)["type"] == "reply_start"
    finally:
        await service.stop(None)


async def test_status_checks_every_configured_service_at_the_address_up_uses(
    tmp_path: Path,
) -> None:
    """A service without a listen key runs on its default address: status checks it there
    (nothing runs here, so it is down and status exits 1)."""
    config = tmp_path / "suite.yaml"
    config.write_text("listen: 127.0.0.1:0\nservices: {tts: {}, agui: {}}\n")
    code, out, err = await run("status", "--config", str(config), "--timeout", "1")
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    assert rows == {"agent": "127.0.0.1:0", "tts": "127.0.0.1:7003", "agui": "127.0.0.1:7010"}
    assert code == 1, err
