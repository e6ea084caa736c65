"""The quickstart's middleware (docs/writing-middleware.md) works as written: in process and
served by a sidecar, on both kinds."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import load_middleware
from hookmesh.schema import MessageKind, text_of
from tests.agent_helpers import collect, customs
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

DOC = Path(__file__).parents[2] / "docs" / "writing-middleware.md"


@pytest.fixture
def shout_module(tmp_path: Path) -> Iterator[str]:
    """The page's Python block saved as ``shout.py`` on the import path."""
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(code) == 1
    (tmp_path / "shout.py").write_text(code[0])
    sys.path.insert(0, str(tmp_path))
    try:
        yield "shout:Shout"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shout", None)


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
