"""@a2a-js/sdk's client (Node.js, A2A 1.0) against `hookmesh serve a2a`: the card, a streamed
task to completion, tasks/get, and a task that pauses for input and is answered
(clients/node/test/a2a-client.js)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.a2a_stack import a2a_stack
from tests.node_process import node_report

pytestmark = pytest.mark.timeout(90)

_NODE_TIMEOUT = 40.0


async def test_the_js_sdk_client_completes_a_streamed_task_and_a_paused_one(
    tmp_path: Path,
) -> None:
    async with a2a_stack(tmp_path) as stack:
        report = await node_report("a2a-client.js", "@a2a-js/sdk", stack.url, timeout=_NODE_TIMEOUT)

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
