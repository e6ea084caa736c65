"""Middlewares that run their own tools hand every other tool's run back untouched: no
generator frame per event, and behind a sidecar one round trip ('final')."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.mcp_tools import McpToolsMiddleware
from hookmesh.middleware.builtin.memory import MemoryMiddleware
from hookmesh.middleware.builtin.remote_agent import RemoteAgentMiddleware
from hookmesh.schema import ToolCall


@pytest.mark.parametrize(
    "mw",
    [
        McpToolsMiddleware([{"name": "files", "command": sys.executable}]),
        RemoteAgentMiddleware([{"name": "desk", "url": "http://127.0.0.1:9"}]),
        MemoryMiddleware(target="127.0.0.1:9", mode="agent_control"),
    ],
    ids=["mcp_tools", "remote_agent", "memory_tools"],
)
def test_another_tools_run_passes_through_as_it_is(mw: Middleware) -> None:
    stream: Any = object()
    call = ToolCall(id="c1", name="someone_elses_tool", arguments="{}")
    assert mw.on_acting(None, {"tool_call": call}, lambda: stream) is stream  # type: ignore[arg-type]
