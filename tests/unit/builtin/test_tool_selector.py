"""Model-based tool selection: both kinds, in process and via a sidecar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from hookmesh.agent import Agent, Tool
from hookmesh.middleware.builtin.tool_selector import (
    SELECT_TOOL,
    SELECTION_EVENT,
    ToolSelectorMiddleware,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, text_of
from tests.agent_helpers import collect, customs
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def _tools(n: int) -> list[Tool]:
    return [
        Tool(
            name=f"tool_{i}",
            description=f"Does thing {i}.",
            parameters={"type": "object", "properties": {}},
            func=lambda: "ok",
        )
        for i in range(n)
    ]


def _main(offered: list[list[str]]) -> Any:
    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        offered.append([t["name"] for t in tools])
        return ScriptedTurn(text="done")

    return script


def _selector(seen: list[tuple[str, str]], turn: ScriptedTurn) -> ScriptedChatModel:
    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append((text_of(messages[-1]), tool_choice))
        return turn

    return ScriptedChatModel(script)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_selector_picks_the_tools_the_model_is_offered(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    seen: list[tuple[str, str]] = []
    pick = ScriptedTurn(tool_calls=[(SELECT_TOOL, {"names": ["tool_7", "tool_3", "nope"]})])
    selector = _selector(seen, pick)
    selector.stream = stream
    mw = await attach(ToolSelectorMiddleware(selector, threshold=5, always_include=["tool_0"]))
    offered: list[list[str]] = []
    agent = Agent(ScriptedChatModel(_main(offered)), kind=kind, tools=_tools(12), middlewares=[mw])
    events = await collect(agent.reply("do thing 7 then 3"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert seen == [("do thing 7 then 3", SELECT_TOOL)]
    assert offered == [["tool_0", "tool_3", "tool_7"]]
    [report] = [c.value for c in customs(events) if c.name == SELECTION_EVENT]
    assert report == {"selected": ["tool_0", "tool_3", "tool_7"], "from": 12}


async def test_few_tools_need_no_selection(kind: MessageKind, attach: Attach) -> None:
    seen: list[tuple[str, str]] = []
    mw = await attach(ToolSelectorMiddleware(_selector(seen, ScriptedTurn("tool_1")), threshold=5))
    offered: list[list[str]] = []
    agent = Agent(ScriptedChatModel(_main(offered)), kind=kind, tools=_tools(5), middlewares=[mw])
    await collect(agent.reply("hi"))
    assert seen == [] and len(offered[0]) == 5


@pytest.mark.parametrize(
    "answer", [ScriptedTurn(error="selector down"), ScriptedTurn(text="no idea, sorry")]
)
async def test_a_failing_selector_keeps_every_tool(
    kind: MessageKind, attach: Attach, answer: ScriptedTurn
) -> None:
    mw = await attach(ToolSelectorMiddleware(_selector([], answer), threshold=3))
    offered: list[list[str]] = []
    agent = Agent(ScriptedChatModel(_main(offered)), kind=kind, tools=_tools(6), middlewares=[mw])
    events = await collect(agent.reply("hi"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert len(offered[0]) == 6
    [report] = [c.value for c in customs(events) if c.name == SELECTION_EVENT]
    assert report["selected"] == [f"tool_{i}" for i in range(6)] and report["error"]


async def test_a_text_answer_and_max_tools(kind: MessageKind) -> None:
    selector = _selector([], ScriptedTurn(text='["tool_4", "tool_2", "tool_9"]'))
    mw = ToolSelectorMiddleware(selector, threshold=3, max_tools=2)
    offered: list[list[str]] = []
    agent = Agent(ScriptedChatModel(_main(offered)), kind=kind, tools=_tools(10), middlewares=[mw])
    await collect(agent.reply("hi"))
    assert offered == [["tool_2", "tool_4"]]


def test_settings_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="threshold must be an int >= 1"):
        ToolSelectorMiddleware(threshold=0)
    with pytest.raises(ValueError, match="must contain"):
        ToolSelectorMiddleware(instruction="pick")
    with pytest.raises(ValueError, match="model must be a ChatModel"):
        ToolSelectorMiddleware("gpt")  # type: ignore[arg-type]


async def test_one_selection_serves_every_step_of_a_reply(
    kind: MessageKind, attach: Attach
) -> None:
    """After a tool round the request is still the user's (an agentic tool result is a user
    message without text of its own): the selector is asked once, the choice kept."""
    seen: list[tuple[str, str]] = []
    pick = ScriptedTurn(tool_calls=[(SELECT_TOOL, {"names": ["tool_3"]})])
    mw = await attach(ToolSelectorMiddleware(_selector(seen, pick), threshold=5))
    offered: list[list[str]] = []

    def main(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        offered.append([t["name"] for t in tools])
        if len(offered) == 1:
            return ScriptedTurn(tool_calls=[("tool_3", {})])
        return ScriptedTurn(text="done")

    agent = Agent(ScriptedChatModel(main), kind=kind, tools=_tools(12), middlewares=[mw])
    events = await collect(agent.reply("do thing 3"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert offered == [["tool_3"], ["tool_3"]]
    assert seen == [("do thing 3", SELECT_TOOL)]
    reports = [c.value for c in customs(events) if c.name == SELECTION_EVENT]
    assert reports == [{"selected": ["tool_3"], "from": 12}] * 2


async def test_a_tool_forced_by_tool_choice_is_always_offered(
    kind: MessageKind, attach: Attach
) -> None:
    """The selector picks tool_3, but the reply forces tool_9: both are offered (a forced
    tool the model cannot see would fail the call)."""
    pick = ScriptedTurn(tool_calls=[(SELECT_TOOL, {"names": ["tool_3"]})])
    mw = await attach(ToolSelectorMiddleware(_selector([], pick), threshold=5))
    offered: list[tuple[str, list[str]]] = []

    def main(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        offered.append((tool_choice, [t["name"] for t in tools]))
        return ScriptedTurn(text="done")

    agent = Agent(ScriptedChatModel(main), kind=kind, tools=_tools(12), middlewares=[mw])
    events = await collect(agent.reply("do thing 3", tool_choice="tool_9"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert offered == [("tool_9", ["tool_3", "tool_9"])]
    [report] = [c.value for c in customs(events) if c.name == SELECTION_EVENT]
    assert report == {"selected": ["tool_3", "tool_9"], "from": 12}
