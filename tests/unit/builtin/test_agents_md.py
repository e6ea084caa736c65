"""AgentsMdMiddleware: one tagged message before the first user turn of every model call,
@imports confined, depth-limited and capped, never in the session, after compression."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware.builtin.agents_md import (
    AGENTS_MD_METADATA_KEY,
    WARNING_EVENT,
    AgentsMdMiddleware,
)
from hookmesh.middleware.builtin.reduction import ReductionMiddleware
from hookmesh.middleware.builtin.summarization import SUMMARY_METADATA_KEY, SummarizationMiddleware
from hookmesh.models import ScriptedTurn
from hookmesh.schema import Message, MessageKind, is_user, text_of
from tests.agent_helpers import collect, customs, echo
from tests.builtin_helpers import Recorded, documented_parameters, parameters
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def _tagged(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if (m.metadata or {}).get(AGENTS_MD_METADATA_KEY)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "AGENTS.md").write_text(
        "Run tests with make test.\nStyle: see @docs/style.md.\n"
        "```\n@docs/not-an-import.md\n```\nCode `@inline/code.md` is not one either.\n"
    )
    (root / "docs" / "style.md").write_text("Use four spaces. Shared: @../shared.md\n")
    (root / "shared.md").write_text("Be brief.\n")
    return root


async def test_one_tagged_message_before_the_first_user_turn_of_every_call(
    kind: MessageKind, attach: Attach, project: Path
) -> None:
    rec = Recorded([ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done", "again"])
    mw = await attach(AgentsMdMiddleware(project))
    agent = Agent(rec.model, kind=kind, system_prompt="Sys.", tools=[echo], middlewares=[mw])
    events = await collect(agent.reply("first"))
    events += await collect(agent.reply("second"))
    assert len(rec.prompts) == 3
    for prompt in rec.prompts:
        at = _tagged(prompt)
        assert at == [1]  # after the system prompt, before the first user turn
        assert is_user(prompt[2]) and text_of(prompt[2]) == "first"
    text = text_of(rec.prompts[0][1])
    assert text == (
        "<agents_md>\nInstructions for this project from its AGENTS.md files (they apply to "
        "the whole conversation):\n\n# AGENTS.md\nRun tests with make test.\nStyle: see "
        "@docs/style.md.\n```\n@docs/not-an-import.md\n```\nCode `@inline/code.md` is not one "
        "either.\n\n# docs/style.md (imported by AGENTS.md)\nUse four spaces. Shared: "
        "@../shared.md\n\n# shared.md (imported by docs/style.md)\nBe brief.\n</agents_md>"
    )
    assert not _tagged(agent.state.context)  # never in the session
    assert not [e for e in customs(events) if e.name == WARNING_EVENT]


async def test_imports_are_confined_depth_limited_and_capped(
    kind: MessageKind, attach: Attach, project: Path
) -> None:
    outside = project.parent / "outside.md"
    outside.write_text("SECRET outside\n")
    (project / "link.md").symlink_to(outside)
    (project / "AGENTS.md").write_text(
        f"Top. @../outside.md @{outside} @link.md @missing.md @d1.md\n"
    )
    for i in range(1, 8):
        (project / f"d{i}.md").write_text(f"Level {i}. @d{i + 1}.md\n")
    rec = Recorded(["ok", "ok"])
    mw = await attach(AgentsMdMiddleware(project, max_depth=5))
    agent = Agent(rec.model, kind=kind, middlewares=[mw])
    events = await collect(agent.reply("hi"))
    text = text_of(rec.prompts[0][_tagged(rec.prompts[0])[0]])
    assert "SECRET" not in text
    assert [line for line in text.splitlines() if line.startswith("Level")] == [
        f"Level {i}. @d{i + 1}.md" for i in range(1, 6)
    ]
    (warning,) = [e.value for e in customs(events) if e.name == WARNING_EVENT]
    assert warning == {
        "warnings": [
            "AGENTS.md imports @../outside.md, which is outside the AGENTS.md root: not loaded",
            f"AGENTS.md imports @{outside}, which is outside the AGENTS.md root: not loaded",
            "AGENTS.md imports @link.md, which is outside the AGENTS.md root: not loaded",
            "AGENTS.md imports @missing.md, which does not exist: not loaded",
            "d5.md imports @d6.md: imports nest deeper than 5 levels, not loaded",
        ]
    }
    await collect(agent.reply("again"))  # the warning is per reply
    capped = await attach(AgentsMdMiddleware(project, ["d1.md", "d7.md"], max_bytes=20))
    rec = Recorded(["ok"])
    events = await collect(Agent(rec.model, kind=kind, middlewares=[capped]).reply("hi"))
    text = text_of(rec.prompts[0][_tagged(rec.prompts[0])[0]])
    assert "# d1.md\nLevel 1. @d2.md\n\n# d2.md (imported by d1.md)\nLeve\n" in text
    assert "Level 7" not in text
    (warning,) = [e.value for e in customs(events) if e.name == WARNING_EVENT]
    assert warning["warnings"] == [
        "d2.md cut: the AGENTS.md content is over 20 bytes",
        "d7.md left out: the AGENTS.md content is over 20 bytes",
    ]


async def test_it_survives_summarisation_and_reduction_in_any_order(
    kind: MessageKind, attach: Attach, project: Path, tmp_path: Path
) -> None:
    summarizer = Recorded(["They talked."] * 5)
    summarization = await attach(SummarizationMiddleware(max_messages=4, model=summarizer.model))
    reduction = await attach(ReductionMiddleware(tmp_path / "offload", max_tokens_for_clear=1))
    agents_md = await attach(AgentsMdMiddleware(project))
    steps: list[Any] = [ScriptedTurn(tool_calls=[("echo", {"text": "y" * 300})]), "one"] * 3
    for order in ([agents_md, summarization, reduction], [summarization, reduction, agents_md]):
        rec = Recorded(steps)
        agent = Agent(rec.model, kind=kind, tools=[echo], middlewares=order)
        for turn in ("a", "b", "c"):
            await collect(agent.reply(turn))
        assert summarizer.prompts, "summarisation never ran"
        assert any((m.metadata or {}).get(SUMMARY_METADATA_KEY) for m in agent.state.context), (
            "no summary in the context"
        )
        for prompt in rec.prompts:
            assert len(_tagged(prompt)) == 1
            (at,) = _tagged(prompt)
            assert is_user(prompt[at + 1]) and not any(is_user(m) for m in prompt[:at])
        assert not _tagged(agent.state.context)
        assert all("Run tests" not in text_of(m) for p in summarizer.prompts for m in p)


async def test_an_already_tagged_prompt_is_left_alone(
    kind: MessageKind, attach: Attach, project: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "AGENTS.md").write_text("Other rules.\n")
    rec = Recorded(["ok"])
    first = await attach(AgentsMdMiddleware(project))
    second = await attach(AgentsMdMiddleware(other))
    await collect(Agent(rec.model, kind=kind, middlewares=[first, second]).reply("hi"))
    (at,) = _tagged(rec.prompts[0])
    assert "Run tests" in text_of(rec.prompts[0][at])


async def test_nothing_is_inserted_without_files(kind: MessageKind, tmp_path: Path) -> None:
    rec = Recorded(["ok"])
    events = await collect(
        Agent(rec.model, kind=kind, middlewares=[AgentsMdMiddleware(tmp_path)]).reply("hi")
    )
    assert not _tagged(rec.prompts[0]) and len(rec.prompts[0]) == 1
    (warning,) = [e.value for e in customs(events) if e.name == WARNING_EVENT]
    assert warning == {"warnings": ["AGENTS.md does not exist: not loaded"]}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"files": "AGENTS.md"}, "files must be a non-empty list"),
        ({"files": []}, "files must be a non-empty list"),
        ({"max_bytes": 0}, "max_bytes must be an int >= 1"),
        ({"max_depth": -1}, "max_depth must be an int >= 0"),
        ({"failure_mode": "x"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AgentsMdMiddleware(tmp_path, **kwargs)


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("agents_md.md") == parameters(AgentsMdMiddleware)
