"""@ag-ui/client's HttpAgent (Node.js) against a live gateway: text, a front-end tool round
trip, an image, errors and a confirmation (clients/node/test/agui-http-agent.js)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agui_stack import agui_stack
from tests.node_process import node_report

pytestmark = pytest.mark.timeout(90)

_NODE_TIMEOUT = 40.0


async def _http_agent(url: str) -> dict[str, Any]:
    return await node_report("agui-http-agent.js", "@ag-ui/client", url, timeout=_NODE_TIMEOUT)


async def test_http_agent_drives_the_gateway(tmp_path: Path) -> None:
    async with agui_stack(tmp_path) as stack:
        report = await _http_agent(f"{stack.url}/agui")

    text = report["text"]
    assert text["error"] is None and text["runError"] is None
    assert text["answer"] == "Hello! You said: hello from node"
    assert text["types"][0] == "RUN_STARTED" and text["types"][-1] == "RUN_FINISHED"

    tool = report["tool"]
    assert tool["first"]["error"] is None
    assert tool["call"]["function"] == {
        "name": "get_location",
        "arguments": '{"precision": "city"}',
    }
    assert tool["first"]["finished"]["outcome"]["pendingToolCallIds"] == [tool["call"]["id"]]
    assert tool["second"]["error"] is None
    assert tool["answer"] == "The tool said: Lisbon"

    assert report["image"]["answer"] == "I see an image (image/png, 70 bytes)."

    error = report["error"]
    assert error["runError"]["code"] == "MODEL_ERROR"
    assert "out of order" in error["runError"]["message"]
    refused = report["refused"]
    assert refused["error"]["status"] == 400
    assert "threadId" in refused["error"]["message"]

    confirm = report["confirm"]
    assert confirm["interrupt"]["reason"] == "tool_call"
    assert confirm["asked"]["finished"]["outcome"]["type"] == "interrupt"
    assert confirm["approved"]["error"] is None
    assert "TOOL_CALL_RESULT" in confirm["approved"]["types"]
    assert confirm["answer"] == "The tool said: deleted notes.txt"
