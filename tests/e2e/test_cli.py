"""The `hookmesh` command end to end, each run as its own process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.commands import DEADLINE, ROOT, run

pytestmark = pytest.mark.timeout(120)


async def test_demo_shows_middlewares_grounding_and_recall() -> None:
    code, out, err = await run("demo")
    assert code == 0, err
    first, second = out.split("session 2 — you:")
    assert "→ get_weather" in first
    assert "[audit_trail (sidecar)]" in first
    assert "[usage_meter (in-process)]" in first
    assert "[hint from rag]" in first and "(wardrobe/snow)" in first
    # Only recall can show the fact the extraction model made of session 1 ("The user is
    # vegetarian.", not the user's words nor the scripted answer's), as a memory hint of
    # session 2; session 1 had nothing to recall yet.
    assert "[hint from memory]" not in first
    [recalled] = [line for line in second.splitlines() if "[hint from memory]" in line]
    assert recalled.endswith("- The user is vegetarian.")
    assert out.count("end: completed") == 2


async def test_up_then_chat_then_ctrl_c(tmp_path: Path) -> None:
    config = tmp_path / "hookmesh.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
tools: [hookmesh.demo:get_weather]
models:
  default:
    type: scripted
    turns:
      - tool_calls: [{{name: get_weather, arguments: {{city: Lisbon}}}}]
      - Sunny in Lisbon.
middlewares:
  - {{type: remote, sidecar: audit}}
sidecars:
  - {{name: audit, middleware: "hookmesh.demo:AuditTrail"}}
"""
    )
    up = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "up",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert up.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            lines = [(await up.stdout.readline()).decode() for _ in range(3)]
        assert lines[0].startswith("agent service")
        assert lines[1].startswith("sidecar audit")
        address = lines[0].split()[-1]
        code, out, err = await run("chat", "--target", address, "--json", "weather in Lisbon?")
        assert code == 0, err
        events = [json.loads(line) for line in out.splitlines()]
        assert events[0]["type"] == "reply_start"
        assert any(e["type"] == "custom" and e["name"] == "audit_trail (sidecar)" for e in events)
        assert (
            "".join(e.get("delta", "") for e in events if e["type"] == "text_block_delta")
            == "Sunny in Lisbon."
        )
        assert events[-1] == {**events[-1], "type": "reply_end", "finish_reason": "completed"}
    finally:
        up.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await up.wait() == 0


async def test_bad_usage_is_reported_not_crashed() -> None:
    code, _, err = await run(
        "sidecar", "--middleware", "no_such_module:Thing", "--listen", "127.0.0.1:0"
    )
    assert code == 2
    assert "cannot load 'no_such_module:Thing'" in err
    code, _, err = await run("sidecar", "--middleware", "x:y", "--listen", "nonsense")
    assert code == 2 and "is not host:port" in err


async def test_chat_with_nobody_there_fails_cleanly() -> None:
    code, out, _ = await run("chat", "--target", "127.0.0.1:1", "--timeout", "2", "hello")
    assert code == 1
    assert "error:" in out
