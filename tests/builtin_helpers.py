"""Helpers for the tests of the tool-contributing built-ins (files, skills, tasks, search)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookmesh.agent import Agent
from hookmesh.agent.models import ScriptedTurn
from hookmesh.schema import AgentEvent, ToolResult, tool_results

DOCS = Path(__file__).parents[1] / "docs"


def calls(*steps: Sequence[tuple[str, dict[str, Any]]], answer: str = "done") -> list[Any]:
    """Scripted turns: each step's tool calls (ids ``call_1``, ``call_2``... in order), then
    a final answer."""
    return [ScriptedTurn(tool_calls=list(step)) for step in steps] + [answer]


def results(agent: Agent) -> dict[str, ToolResult]:
    """Every tool result in the agent's context, by call id."""
    return {r.call_id: r for m in agent.state.context for r in tool_results(m)}


def own(events: list[AgentEvent]) -> list[AgentEvent]:
    """The reply's own events (nested runs' left out)."""
    return [e for e in events if not e.source_path]


def documented_parameters(page: str) -> set[str]:
    """The names in a docs page's parameter table (the one headed ``| parameter |``)."""
    text = (DOCS / "middleware" / page).read_text()
    table = text.split("| parameter |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M))


def parameters(cls: type) -> set[str]:
    """The constructor's parameter names."""
    return set(inspect.signature(cls).parameters)


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of a docs page."""
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)
