"""Helpers for the tests of the tool-contributing built-ins (files, skills, tasks, search)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import AgentEvent, Message, ToolResult, Usage, tool_results

DOCS = Path(__file__).parents[1] / "docs"


def calls(*steps: Sequence[tuple[str, dict[str, Any]]], answer: str = "done") -> list[Any]:
    """Scripted turns: each step's tool calls (ids ``call_1``, ``call_2``... in order), then
    a final answer."""
    return [ScriptedTurn(tool_calls=list(step)) for step in steps] + [answer]


class Recorded:
    """A scripted model (`model`) playing `turns` in order, recording each call's prompt,
    tool names and tool choice."""

    def __init__(self, turns: Sequence[ScriptedTurn | str], *, usage: Usage | None = None):
        self.turns = [ScriptedTurn(t, usage=usage) if isinstance(t, str) else t for t in turns]
        self.prompts: list[list[Message]] = []
        self.tools: list[list[str]] = []
        self.choices: list[str] = []
        self.model = ScriptedChatModel(self._play)

    def _play(self, messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        self.prompts.append(list(messages))
        self.tools.append([t["name"] for t in tools])
        self.choices.append(tool_choice)
        if len(self.prompts) > len(self.turns):
            return ScriptedTurn(error=f"no turn {len(self.prompts)} in the script")
        return self.turns[len(self.prompts) - 1]


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
