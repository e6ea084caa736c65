"""The AG-UI gateway over real HTTP in front of a real agent service whose supervisor's
worker calls an external tool: the run stops on it as on a front-end tool, named as the tool
the front-end runs (not the hidden ``external_scout`` call it was passed up through) with
who asks, in the live stream and in the thread; the client's result reaches the worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

from hookmesh.services.agui import load_agui_config, start_agui_gateway
from tests.agui_stack import TIMEOUT, post_run, run_input
from tests.service_tools import external_service

pytestmark = pytest.mark.timeout(60)

LOCATE = {
    "name": "get_location",
    "description": "The user's location, from the browser.",
    "parameters": {"type": "object", "properties": {"precision": {"type": "string"}}},
}


@pytest.fixture(params=["flat", "agentic"])
async def http(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway in front of an agent service whose worker ``scout`` calls `get_location`."""
    async with external_service(
        tmp_path, team=True, kind=request.param, factory="browser_locating_team"
    ) as address:
        gateway = await start_agui_gateway(
            load_agui_config(None, agent=address), address="127.0.0.1:0"
        )
        try:
            url = f"http://127.0.0.1:{gateway.port}"
            async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
                yield client
        finally:
            await gateway.stop(0.5)


def _call(function: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": function}


async def test_a_workers_external_call_is_a_front_end_call_with_who_asks(
    http: httpx.AsyncClient,
) -> None:
    history: list[Any] = [{"id": "u1", "role": "user", "content": "where am I?"}]
    _, first = await post_run(http, run_input("t1", "r1", history, tools=[LOCATE]))
    starts = [e for e in first if e["type"] == "TOOL_CALL_START"]
    assert [s["toolCallName"] for s in starts] == ["ask_scout", "get_location"]
    call = starts[-1]
    assert call["metadata"] == {"hookmesh": {"askedBy": ["scout"], "via": "external_scout"}}
    args = [e["delta"] for e in first if e.get("toolCallId") == call["toolCallId"] and "delta" in e]
    assert json.loads("".join(args)) == {"precision": "city"}
    assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}
    nested = [e["value"] for e in first if e.get("name") == "hookmesh.nested"]
    asks = [v for v in nested if v["type"] == "require_external_execution"]
    assert [(v["path"], [c["name"] for c in v["toolCalls"]]) for v in asks] == [
        (["scout"], ["get_location"])
    ]
    assert_valid_agui(first, max_warnings=0)

    thread = (await http.get("/agui/threads/t1")).json()
    assert thread["status"] == "awaiting_external_execution"
    assert thread["pendingToolCallIds"] == [call["toolCallId"]]
    assert thread["pendingToolCalls"] == [
        {
            "toolCallId": call["toolCallId"],
            "toolName": "get_location",
            "arguments": '{"precision": "city"}',
            "askedBy": ["scout"],
        }
    ]
    named = [c["function"]["name"] for m in thread["messages"] for c in m.get("toolCalls") or ()]
    assert named == ["ask_scout", "get_location"]

    function = {"name": "get_location", "arguments": '{"precision": "city"}'}
    history += [
        {"id": "a1", "role": "assistant", "toolCalls": [_call(function, call["toolCallId"])]},
        {"id": "t-1", "role": "tool", "toolCallId": call["toolCallId"], "content": "Bergen"},
    ]
    _, second = await post_run(http, run_input("t1", "r2", history, tools=[LOCATE]))
    results = [e["content"] for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["The user is in Bergen."]  # the worker's answer: the result reached it
    said = "".join(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "The user is in Bergen.Thanks."  # the worker speaks, then the top
    assert second[-1]["outcome"] == {"type": "success"}
    assert_valid_agui(second, max_warnings=0)
    assert (await http.get("/agui/threads/t1")).json()["status"] == "idle"
