"""The page's middlewares (docs/writing-middleware.md) work as written: the quickstart and the
tool with a run context, in process and served by a sidecar, on both kinds."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import load_middleware
from hookmesh.schema import MessageKind, text_of, tool_results
from tests.agent_helpers import collect, customs
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

DOC = Path(__file__).parents[2] / "docs" / "writing-middleware.md"


def _page_module(tmp_path: Path, name: str, defines: str) -> Iterator[str]:
    """The page's Python block defining `defines`, saved as ``<name>.py`` on the import path."""
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    [block] = [c for c in code if f"class {defines}(" in c]
    (tmp_path / f"{name}.py").write_text(block)
    sys.path.insert(0, str(tmp_path))
    try:
        yield f"{name}:{defines}"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


@pytest.fixture
def shout_module(tmp_path: Path) -> Iterator[str]:
    """The quickstart, as ``shout.py``."""
    yield from _page_module(tmp_path, "shout", "Shout")


@pytest.fixture
def notes_module(tmp_path: Path) -> Iterator[str]:
    """The tool example, as ``notes.py``."""
    yield from _page_module(tmp_path, "notes", "Notes")


class PromptSpy(Middleware):
    """Records the system prompt each model call receives (inner to the one under test)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        self.prompts.append(text_of(kwargs["messages"][0]))
        return await next_handler()


async def test_the_quickstart_middleware_runs(
    shout_module: str, attach: Attach, kind: MessageKind
) -> None:
    spy = PromptSpy()
    shout = await attach(load_middleware(shout_module))
    agent = Agent(
        ScriptedChatModel(["HELLO."]),
        system_prompt="Be brief.",
        middlewares=[shout, spy],
        kind=kind,
    )
    events = await collect(agent.reply("hi"))
    assert spy.prompts == ["Be brief. Answer in capital letters."]
    assert [(c.name, c.value) for c in customs(events)] == [("shout", {"model_calls": 1})]
    assert events[-1].type == "reply_end" and events[-1].finish_reason == "completed"


async def test_the_tool_example_runs_with_its_context(
    notes_module: str, attach: Attach, kind: MessageKind
) -> None:
    notes = await attach(load_middleware(notes_module))
    model = ScriptedChatModel(
        [
            ScriptedTurn(tool_calls=[("note", {"text": "milk"}), ("note", {"text": " "})]),
            ScriptedTurn(tool_calls=[("note", {"text": "eggs"})]),
            "Noted.",
        ]
    )
    agent = Agent(model, middlewares=[notes], kind=kind)
    events = await collect(agent.reply("remember"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert [(c.name, c.value) for c in customs(events)] == [
        ("notes", ["milk"]),
        ("notes", ["milk", "eggs"]),
    ]
    found = [(r.state, r.text) for m in agent.state.context for r in tool_results(m)]
    assert found == [
        ("success", "noted (1 so far)"),
        ("error", "Error: give the note some text"),
        ("success", "noted (2 so far)"),
    ]
