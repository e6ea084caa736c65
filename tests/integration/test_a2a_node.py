"""@a2a-js/sdk's client (Node.js, A2A 1.0) against `hookmesh serve a2a`: the card, a streamed
task to completion, tasks/get, and a task that pauses for input and is answered
(clients/node/test/a2a-client.js)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_stack import a2a_stack
from tests.node_process import run_node

pytestmark = pytest.mark.timeout(90)

_NODE_DIR = Path(__file__).resolve().parents[2] / "clients" / "node"
_SCRIPT = _NODE_DIR / "test" / "a2a-client.js"
_NODE_TIMEOUT = 40.0


async def _client(url: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (_NODE_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.fail("node or @a2a-js/sdk is missing: run `make node`")
    code, out, err = await run_node(node, str(_SCRIPT), url, timeout=_NODE_TIMEOUT, cwd=_NODE_DIR)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


async def test_the_js_sdk_client_completes_a_streamed_task_and_a_paused_one(
    tmp_path: Path,
) -> None:
    async with a2a_stack(tmp_path) as stack:
        report = await _client(stack.url)

    assert report["card"]["name"] == "weather-desk"
    assert "get_weather" in report["card"]["skills"]

    streamed = report["streamed"]
    assert streamed["kinds"][0] == "task"
    assert streamed["states"][0] == "TASK_STATE_WORKING"
    assert streamed["states"][-1] == "TASK_STATE_COMPLETED"
    assert streamed["hookmesh"][0] == "reply_start" and "tool_result_end" in streamed["hookmesh"]
    assert streamed["artifact"] == ["The tool said: -3 °C, snow"]
    assert streamed["got"] == {
        "state": "TASK_STATE_COMPLETED",
        "artifact": ["The tool said: -3 °C, snow"],
    }

    asked, answered = report["paused"]["asked"], report["paused"]["answered"]
    assert asked["states"][-1] == "TASK_STATE_INPUT_REQUIRED"
    sentence, pending = asked["status"]
    assert sentence.startswith("Confirm these tool calls (delete_file)")
    assert pending["awaiting"] == "confirmation"
    assert pending["tool_calls"][0]["name"] == "delete_file"
    assert answered["states"][-1] == "TASK_STATE_COMPLETED"
    assert answered["artifact"] == ["The tool said: deleted notes.txt"]
