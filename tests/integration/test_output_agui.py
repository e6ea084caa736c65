"""Structured output through the AG-UI gateway: the schema in forwardedProps, the answer in
RUN_FINISHED's result, streams that pass ag-ui-validate, bad schemas refused with 400."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui, validate_agui_endpoint

from hookmesh.agent import FINAL_TOOL
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from tests.agui_stack import TIMEOUT, post_run, run_input

pytestmark = pytest.mark.timeout(60)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
}
GOOD = {"city": "Oslo", "temp_c": -3}


def _props(**output: Any) -> dict[str, Any]:
    return {"hookmesh": {"outputSchema": {"name": "Weather", "schema": SCHEMA, **output}}}


def _user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "content": text}


@pytest.fixture(params=["native", "tool"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A gateway before an agent whose scripted model answers `GOOD` the strategy's way."""
    native = request.param == "native"
    turn: Any = (
        json.dumps(GOOD) if native else {"tool_calls": [{"name": FINAL_TOOL, "arguments": GOOD}]}
    )
    model = {"type": "scripted", "turns": [turn], "native_output": native}
    settings = load_config(
        None, store=f"sqlite:///{tmp_path}/agent.db", models={"default": model}, grace_seconds=0.5
    )
    agent = await start_agent_service(settings, address="127.0.0.1:0")
    try:
        config = load_agui_config(None, agent=f"127.0.0.1:{agent.port}")
        gateway = await start_agui_gateway(config, address="127.0.0.1:0")
        try:
            yield f"http://127.0.0.1:{gateway.port}"
        finally:
            await gateway.stop(0.5)
    finally:
        await agent.stop(0.5)


async def test_the_answer_is_in_run_finished(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        body = run_input("t-out", "r1", [_user("Weather?")], forwardedProps=_props())
        response, events = await post_run(http, body)
    assert response.status_code == 200
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["result"] == {
        "finishReason": "completed",
        "output": GOOD,
        "outputSchema": "Weather",
    }
    assert_valid_agui(events, max_warnings=0)


async def test_the_live_endpoint_passes_ag_ui_validate(url: str) -> None:
    report = await validate_agui_endpoint(
        f"{url}/agui",
        input=run_input("t-live", "r1", [_user("Weather?")], forwardedProps=_props()),
        timeout_ms=int(TIMEOUT * 1000),
        features=["shared-state"],
    )
    assert [(d.rule, d.severity, d.message) for d in report.diagnostics] == []


async def test_answers_that_never_validate_are_a_run_error(url: str) -> None:
    strict = {**SCHEMA, "properties": {**SCHEMA["properties"], "city": {"enum": ["Bergen"]}}}
    props = {"hookmesh": {"outputSchema": {"schema": strict, "maxRetries": 0}}}
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        _, events = await post_run(
            http, run_input("t-bad", "r1", [_user("W?")], forwardedProps=props)
        )
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "OUTPUT_INVALID"
    assert_valid_agui(events, max_warnings=0)


@pytest.mark.parametrize(
    ("output", "field"),
    [
        ({"schema": {"type": "objekt"}}, "forwardedProps.hookmesh.outputSchema.schema.type"),
        ({"schema": "not an object"}, "forwardedProps.hookmesh.outputSchema"),
        ({"schema": SCHEMA, "name": "a b"}, "forwardedProps.hookmesh.outputSchema.name"),
    ],
)
async def test_a_bad_schema_is_400_with_its_path(
    url: str, output: dict[str, Any], field: str
) -> None:
    props = {"hookmesh": {"outputSchema": output}}
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        response = await http.post(
            "/agui", json=run_input("t-400", "r1", [_user("W?")], forwardedProps=props)
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["reason"] == "INVALID_OUTPUT_SCHEMA"
    assert error["violations"][0]["field"] == field
