"""The demo middlewares say where they ran, from where they run: in process, or behind a
sidecar (the same class both ways)."""

from __future__ import annotations

from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.models import DemoChatModel
from hookmesh.suite.demo import AuditTrail, UsageMeter, get_weather
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("middleware", [AuditTrail, UsageMeter])
async def test_a_demo_middleware_is_labelled_where_it_runs(
    attach: Attach, request: pytest.FixtureRequest, middleware: Any
) -> None:
    where = "sidecar" if request.node.callspec.params["attach"] == "sidecar" else "in-process"
    agent = Agent(DemoChatModel(), tools=[get_weather], middlewares=[await attach(middleware())])
    names = [e.name async for e in agent.reply("weather in Oslo?") if e.type == "custom"]
    key = "audit_trail" if middleware is AuditTrail else "usage_meter"
    assert names == [f"{key} ({where})"]
