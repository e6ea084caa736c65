"""Middlewares that contribute tools run them in the tools' own runs: none of them wraps
on_acting, so another tool's run never reaches them (no generator frame per event, and
behind a sidecar no round trip at all)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.mcp_tools import McpToolsMiddleware
from hookmesh.middleware.builtin.memory import MemoryMiddleware
from hookmesh.middleware.builtin.remote_agent import RemoteAgentMiddleware
from hookmesh.middleware.builtin.skills import SkillsMiddleware
from hookmesh.middleware.builtin.tasks import TasksMiddleware
from hookmesh.middleware.builtin.tool_search import ToolSearchMiddleware
from tests.agent_helpers import echo


@pytest.mark.parametrize(
    "make",
    [
        lambda _: McpToolsMiddleware([{"name": "files", "command": sys.executable}]),
        lambda _: RemoteAgentMiddleware([{"name": "desk", "url": "http://127.0.0.1:9"}]),
        lambda _: MemoryMiddleware(target="127.0.0.1:9", mode="agent_control"),
        lambda _: TasksMiddleware(),
        lambda root: SkillsMiddleware(root),
        lambda _: ToolSearchMiddleware([echo]),
    ],
    ids=["mcp_tools", "remote_agent", "memory_tools", "tasks", "skills", "tool_search"],
)
def test_another_tools_run_never_reaches_a_tool_middleware(
    make: Callable[[Path], Middleware], tmp_path: Path
) -> None:
    mw = make(tmp_path)
    assert not mw.implements("on_acting")
    assert "on_acting" not in mw.describe().hooks
