"""The agentic file memory: index in the system prompt, model-picked files shown as a hint,
a write tool confined to its folder; flat and agentic, in process and via a sidecar."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware.builtin.file_memory import (
    INDEX,
    WARNING_EVENT,
    FileMemoryMiddleware,
    parse_memory_file,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, is_hint, is_system, text_of, tool_results
from tests.agent_helpers import collect, customs
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def write(root: Path, name: str, description: str, kind: str, body: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    head = f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n\n"
    (root / f"{name}.md").write_text(head + body + "\n")


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """A Memory/ folder with three files and an index."""
    root = tmp_path / "Memory"
    write(root, "diet", "What the user eats", "user", "The user is vegetarian since 2019.")
    write(root, "style", "How the user wants answers", "feedback", "Short answers, no emoji.")
    write(root, "garden", "The user's garden project", "project", "Raised beds; tomatoes.")
    (root / INDEX).write_text(
        "# Memory index\n- [diet](diet.md) (user) — What the user eats\n"
        "- [style](style.md) (feedback) — How the user wants answers\n"
    )
    return root


class Recorder:
    """A scripted model that answers the selection call with `selection` and the agent's calls
    with `turns`, recording every prompt."""

    def __init__(self, selection: str | None, *turns: ScriptedTurn) -> None:
        self.selection = selection
        self.turns = turns or (ScriptedTurn(text="ok"),)
        self.selections: list[list[Message]] = []
        self.prompts: list[list[Message]] = []
        self.model = ScriptedChatModel(self.script)

    def script(self, messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        if tool_choice == "none" and "memory files" in text_of(messages[0]):
            self.selections.append(list(messages))
            if self.selection is None:
                return ScriptedTurn(error="selection model down")
            return ScriptedTurn(text=self.selection)
        self.prompts.append(list(messages))
        return self.turns[min(len(self.prompts), len(self.turns)) - 1]


def tree(root: Path) -> list[str]:
    """Every path under `root`, sorted."""
    return sorted(str(p) for p in root.rglob("*"))


def hints(messages: Sequence[Message]) -> list[str]:
    return [text_of(m) for m in messages if is_hint(m)]


async def test_index_in_the_prompt_and_picked_files_before_the_first_step(
    kind: MessageKind, attach: Attach, memory: Path
) -> None:
    picks = json.dumps({"files": ["diet.md", "missing.md", "../secrets.md", "style", "diet.md"]})
    rec = Recorder(picks)
    mw = FileMemoryMiddleware(memory, model=rec.model)
    agent = Agent(
        rec.model, kind=kind, system_prompt="You are a cook.", middlewares=[await attach(mw)]
    )
    events = await collect(agent.reply("Plan my dinner for tonight."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # The selection saw the frontmatter list and the request.
    listing = text_of(rec.selections[0][1])
    assert "Plan my dinner" in listing and "- garden.md (project): The user's garden project" in (
        listing
    )
    # The system prompt carries the index; the model saw only listed files' contents.
    system = rec.prompts[0][0]
    assert is_system(system) and text_of(system).startswith("You are a cook.")
    assert "- [style](style.md) (feedback)" in text_of(system)
    [hint] = hints(rec.prompts[0])
    assert "## diet.md" in hint and "vegetarian since 2019" in hint
    assert "## style.md" in hint and "garden" not in hint and "secrets" not in hint
    assert [e.text for e in events if e.type == "hint_block"] == [hint]  # type: ignore[union-attr]
    assert hints(agent.state.context) == []


async def test_a_malformed_selection_shows_nothing_and_a_failing_one_warns(
    kind: MessageKind, memory: Path
) -> None:
    rec = Recorder("diet.md please")
    agent = Agent(rec.model, kind=kind, middlewares=[FileMemoryMiddleware(memory)])
    events = await collect(agent.reply("What should I eat?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert hints(rec.prompts[0]) == [] and len(rec.selections) == 1
    down = Recorder(None)
    agent = Agent(down.model, kind=kind, middlewares=[FileMemoryMiddleware(memory)])
    events = await collect(agent.reply("What should I eat?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert [e.name for e in customs(events)] == [WARNING_EVENT]
    closed = FileMemoryMiddleware(memory, failure_mode="fail_closed")
    agent = Agent(down.model, kind=kind, middlewares=[closed])
    events = await collect(agent.reply("What should I eat?"))
    assert events[-1].finish_reason == "error"  # type: ignore[union-attr]


async def test_the_index_and_each_file_are_cut_to_their_budgets(memory: Path) -> None:
    (memory / INDEX).write_text("# Memory index\n" + "".join(f"- line {i}\n" for i in range(400)))
    write(memory, "long", "A long file", "reference", "word " * 5000)
    rec = Recorder(json.dumps({"files": ["long.md"]}))
    mw = FileMemoryMiddleware(memory, model=rec.model, index_max_tokens=50, max_tokens_per_file=100)
    await collect(Agent(rec.model, middlewares=[mw]).reply("Show me the long one."))
    system = text_of(rec.prompts[0][0])
    index = system.split(f"{INDEX}:\n", 1)[1]
    assert len(index) < 50 * 4 + 80 and "index truncated" in index and "more lines" in index
    [hint] = hints(rec.prompts[0])
    assert len(hint) < 100 * 4 + 200 and "file truncated" in hint


async def _tool_calls_reply(
    kind: MessageKind, attach: Attach, root: Path, ask: str, *calls: tuple[str, dict[str, Any]]
) -> tuple[Agent, Recorder, list[Any]]:
    """One reply in which the model makes `calls` one step each, then answers; every call
    must succeed. Returns the agent, the recorder and the tool results."""
    rec = Recorder(
        json.dumps({"files": []}),
        *(ScriptedTurn(tool_calls=[call]) for call in calls),
        ScriptedTurn(text="Saved."),
    )
    agent = Agent(
        rec.model,
        kind=kind,
        middlewares=[await attach(FileMemoryMiddleware(root, model=rec.model))],
    )
    events = await collect(agent.reply(ask))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    results = [r for m in agent.state.context for r in tool_results(m)]
    assert [r.state for r in results] == ["success"] * len(calls)
    return agent, rec, results


async def test_the_agent_writes_memories_through_the_tool(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    root = tmp_path / "Memory"
    note = {
        "name": "pets",
        "description": "The user's pets: names and kinds",
        "type": "user",
        "content": "A dog called Rex.\n\n---\nnot: frontmatter",
    }
    agent, rec, results = await _tool_calls_reply(
        kind,
        attach,
        root,
        "Remember that my dog is called Rex.",
        ("write_memory", note),
        ("write_memory", {**note, "description": "Pets: Rex, Kiki"}),
        ("read_memory", {"name": "pets"}),
    )
    meta, body = parse_memory_file((root / "pets.md").read_text())
    assert meta is not None and (meta.name, meta.type) == ("pets", "user")
    assert meta.description == "Pets: Rex, Kiki" and body.strip().startswith("A dog called Rex.")
    index = (root / INDEX).read_text().splitlines()
    assert index == ["# Memory index", "- [pets](pets.md) (user) — Pets: Rex, Kiki"]
    assert "A dog called Rex." in results[2].text
    # The next reply's selection lists the new file.
    await collect(agent.reply("What is my dog called?"))
    assert "- pets.md (user): Pets: Rex, Kiki" in text_of(rec.selections[-1][1])


async def test_an_index_line_is_found_by_its_exact_link(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    root = tmp_path / "Memory"
    diet = {"name": "diet", "description": "Vegetarian; see [sport](sport.md)", "type": "user"}
    sport = {"name": "sport", "description": "Tennis", "type": "user", "content": "Tennis."}
    await _tool_calls_reply(
        kind,
        attach,
        root,
        "Remember my diet and my sport.",
        ("write_memory", {**diet, "content": "No meat."}),
        ("write_memory", sport),
        ("write_memory", {**sport, "description": "Tennis, Sundays"}),
    )
    # diet's description mentions "](sport.md)": sport's own line is still the one replaced.
    assert (root / INDEX).read_text().splitlines() == [
        "# Memory index",
        "- [diet](diet.md) (user) — Vegetarian; see [sport](sport.md)",
        "- [sport](sport.md) (user) — Tennis, Sundays",
    ]


@pytest.mark.parametrize(
    "name",
    ["../evil", "../../etc/passwd", "/etc/passwd", "sub/dir", "MEMORY", "memory.md", ".hidden", ""],
)
async def test_the_write_tool_cannot_leave_its_folder(
    name: str, attach: Attach, tmp_path: Path
) -> None:
    root = tmp_path / "box" / "Memory"
    root.mkdir(parents=True)
    before = tree(tmp_path)
    call = {"name": name, "description": "x", "type": "user", "content": "pwned"}
    rec = Recorder(None, ScriptedTurn(tool_calls=[("write_memory", call)]), ScriptedTurn(text="ok"))
    agent = Agent(rec.model, middlewares=[await attach(FileMemoryMiddleware(root))])
    await collect(agent.reply("Write it."))
    [result] = [r for m in agent.state.context for r in tool_results(m)]
    assert result.state == "error"
    assert tree(tmp_path) == before


async def test_links_are_neither_followed_nor_replaced(tmp_path: Path) -> None:
    root = tmp_path / "Memory"
    root.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: x\ndescription: outside\ntype: user\n---\nsecret\n")
    os.symlink(outside, root / "link.md")
    mw = FileMemoryMiddleware(root)
    assert mw.catalog() == []
    for tool in mw.list_tools():
        args = {"name": "link"}
        if tool.name == "write_memory":
            args |= {"description": "d", "type": "user", "content": "overwritten"}
        with pytest.raises(ValueError, match="outside the memory folder"):
            [piece async for piece in tool.run(args)]
    assert outside.read_text().endswith("secret\n")


def test_bad_parameters_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_files"):
        FileMemoryMiddleware(tmp_path, max_files=0)
    with pytest.raises(ValueError, match="ChatModel"):
        FileMemoryMiddleware(tmp_path, model="gpt")  # type: ignore[arg-type]
    assert sorted(t.name for t in FileMemoryMiddleware(tmp_path).list_tools()) == [
        "read_memory",
        "write_memory",
    ]


async def test_per_user_folders_keep_each_users_memory_apart(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    from hookmesh.middleware import user_folder

    root = tmp_path / "Memory"
    write(root / user_folder("bob"), "diet", "What the user eats", "user", "Bob eats fish.")
    save = ScriptedTurn(
        tool_calls=[
            (
                "write_memory",
                {"name": "diet", "description": "diet", "type": "user", "content": "Vegan."},
            )
        ]
    )
    rec = Recorder(json.dumps({"files": ["diet.md"]}), save, ScriptedTurn(text="ok"))
    mw = FileMemoryMiddleware(root, model=rec.model, per_user=True)
    agent = Agent(rec.model, kind=kind, middlewares=[await attach(mw)], user_id="alice")
    events = await collect(agent.reply("I am vegan now."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    alice = root / user_folder("alice")
    assert "Vegan." in (alice / "diet.md").read_text()
    assert "Bob eats fish." in (root / user_folder("bob") / "diet.md").read_text()
    assert not (root / "diet.md").exists() and "Bob" not in text_of(rec.prompts[0][0])
    assert [(s, r["file"]) async for s, r in mw.export_user("alice")] == [
        ("file_memory.files", "MEMORY.md"),
        ("file_memory.files", "diet.md"),
    ]
    assert await mw.forget_user("alice") == [("file_memory.files", 2)]
    assert not alice.exists() and (root / user_folder("bob") / "diet.md").exists()
    assert await mw.forget_user("alice") == [("file_memory.files", 0)]
    shared = FileMemoryMiddleware(root)
    assert shared.user_stores() == () and await shared.forget_user("bob") == []
