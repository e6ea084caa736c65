"""SkillsMiddleware: the listing, inline loads, files confined to their skill, forked
sub-agents (with and without the conversation) and their nested events."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, Confirmation, Resume, tool
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.budget import BudgetMiddleware
from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware
from hookmesh.middleware.builtin.skills import SkillsMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    EventSource,
    MessageKind,
    Usage,
    is_system,
    make_hint,
    text_of,
    tool_results,
)
from tests.agent_helpers import collect
from tests.builtin_helpers import (
    Recorded,
    calls,
    documented_parameters,
    own,
    parameters,
    results,
)
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

INSTRUCTIONS = "Dress in three layers: base, mid, shell."


def _skill(root: Path, name: str, description: str, body: str, **front: Any) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    extra = "".join(f"{k}: {v}\n" for k, v in front.items())
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"
    )
    return folder


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    layers = _skill(root, "winter-layers", "Dress for cold weather.", INSTRUCTIONS)
    (layers / "reference").mkdir()
    (layers / "reference" / "fabrics.md").write_text("Merino keeps warm when wet.\n")
    _skill(
        root,
        "research",
        "Look things up in the notes.",
        "Research with read_notes.",
        context="fork",
        tools="[read_notes]",
    )
    _skill(
        root,
        "recap",
        "Recap the conversation.",
        "Recap what was said.",
        context="fork_with_context",
    )
    _skill(
        root,
        "careful",
        "Needs a special model.",
        "Be careful.",
        context="fork",
        model="nonexistent",
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("TOP SECRET\n")
    _skill(outside, "linked-out", "Lives outside.", "Outside instructions.")
    (root / "linked-out").symlink_to(outside / "linked-out")
    (layers / "secret.md").symlink_to(outside / "secret.md")
    leaky = root / "leaky"
    leaky.mkdir()
    (leaky / "SKILL.md").symlink_to(outside / "secret.md")
    _skill(root, "mismatch", "Wrong name inside.", "x").joinpath("SKILL.md").write_text(
        "---\nname: other\ndescription: d\n---\nx\n"
    )
    (root / "no-front-matter").mkdir()
    (root / "no-front-matter" / "SKILL.md").write_text("just text\n")
    (root / "Bad Name").mkdir()
    return root


@tool(read_only=True)
def read_notes(topic: str) -> str:
    """Read the notes on a topic.

    Args:
        topic: The topic.
    """
    return f"notes on {topic}: the answer is 42"


async def test_the_prompt_lists_valid_skills_by_name_and_description_only(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    rec = Recorded(["hi"])
    mw = await attach(SkillsMiddleware(skills))
    await collect(Agent(rec.model, kind=kind, system_prompt="Base.", middlewares=[mw]).reply("x"))
    system = text_of(rec.prompts[0][0])
    assert system.startswith("Base.\n\n## Skills\n")
    assert system.splitlines()[-4:] == [
        "- careful (sub-agent): Needs a special model.",
        "- recap (sub-agent): Recap the conversation.",
        "- research (sub-agent): Look things up in the notes.",
        "- winter-layers: Dress for cold weather.",
    ]
    assert INSTRUCTIONS not in system and "linked-out" not in system and "leaky" not in system
    assert rec.tools[0] == ["skill"]


async def test_the_folder_is_read_once_per_reply(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    """A skill added during a reply shows up in the next reply's prompt, not in the later
    steps of the running one (the listing is read once per reply)."""

    @tool
    def add_skill() -> str:
        """Add a skill."""
        _skill(skills, "fresh", "Added mid-reply.", "x")
        return "added"

    rec = Recorded([ScriptedTurn(tool_calls=[("add_skill", {})]), "done", "again"])
    mw = await attach(SkillsMiddleware(skills))
    agent = Agent(rec.model, kind=kind, tools=[add_skill], middlewares=[mw])
    await collect(agent.reply("x"))
    await collect(agent.reply("y"))
    listed = ["- fresh: Added mid-reply." in text_of(p[0]) for p in rec.prompts]
    assert listed == [False, False, True]


async def test_an_inline_skill_and_its_files_load_on_demand(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    mw = await attach(SkillsMiddleware(skills))
    agent = Agent(
        ScriptedChatModel(
            calls(
                [("skill", {"name": "winter-layers"})],
                [("skill", {"name": "winter-layers", "file": "reference/fabrics.md"})],
                [("skill", {"name": "research", "file": "SKILL.md"})],
            )
        ),
        kind=kind,
        middlewares=[mw],
    )
    await collect(agent.reply("what to wear?"))
    got = results(agent)
    assert got["call_1"].text == (
        f'<skill name="winter-layers">\n{INSTRUCTIONS}\n</skill>\n\nFiles of this skill (load '
        "one with skill(name='winter-layers', file=...)): reference/fabrics.md"
    )
    assert got["call_2"].text == "Merino keeps warm when wet.\n"
    assert got["call_3"].text.startswith("---\nname: research\n")  # a file, even of a fork skill
    assert all(r.state == "success" for r in got.values())


async def test_skill_files_and_folders_never_escape(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    outside = skills.parent / "outside"
    attempts = [
        {"name": "winter-layers", "file": "../research/SKILL.md"},
        {"name": "winter-layers", "file": "../../outside/secret.md"},
        {"name": "winter-layers", "file": str(outside / "secret.md")},
        {"name": "winter-layers", "file": "secret.md"},
        {"name": "../outside"},
        {"name": "linked-out"},
        {"name": "leaky"},
        {"name": "mismatch"},
        {"name": "no-such-skill"},
    ]
    mw = await attach(SkillsMiddleware(skills))
    agent = Agent(
        ScriptedChatModel(calls(*[[("skill", a)] for a in attempts])), kind=kind, middlewares=[mw]
    )
    await collect(agent.reply("go"))
    got = results(agent)
    for i, attempt in enumerate(attempts, start=1):
        result = got[f"call_{i}"]
        assert result.state == "error", (attempt, result.text)
        assert "SECRET" not in result.text and "Outside instructions" not in result.text
    assert "is outside the skill folder winter-layers" in got["call_1"].text
    assert "is not a skill name" in got["call_5"].text
    assert "is outside the skills folder" in got["call_6"].text
    assert "is outside the skill folder leaky" in got["call_7"].text
    assert "must equal the folder's name" in got["call_8"].text
    assert "there is no skill named 'no-such-skill'" in got["call_9"].text


def _fork_parent(skill: str, task: str) -> list[Any]:
    return calls([("skill", {"name": skill, "task": task})], answer="The notes say 42.")


async def test_a_forked_skill_runs_a_sub_agent_and_nests_its_events(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    sub = Recorded([ScriptedTurn(tool_calls=[("read_notes", {"topic": "x"})]), "It is 42."])
    mw = await attach(SkillsMiddleware(skills, model=sub.model, tools=[read_notes]))
    agent = Agent(
        ScriptedChatModel(_fork_parent("research", "What is x?")), kind=kind, middlewares=[mw]
    )
    events = await collect(agent.reply("what is x?"))
    # the sub-agent: the skill as its system prompt, its own tools, the task as input
    assert text_of(sub.prompts[0][0]) == "Research with read_notes."
    assert [text_of(m) for m in sub.prompts[0][1:]] == ["What is x?"]
    assert sub.tools[0] == ["read_notes"]
    # the parent gets the final answer only (the sub-agent's call_1 is not the parent's)
    got = results(agent)
    assert list(got) == ["call_1"] and got["call_1"].text == "It is 42."
    assert got["call_1"].state == "success"
    assert len(agent.state.context) == 4  # user, call, result, answer: nothing of the sub-agent
    nested = [e for e in events if e.source_path]
    run_id = nested[0].reply_id and nested[0].source_path[0].run_id  # type: ignore[index]
    step = EventSource(call_id="call_1", tool_name="skill", agent_name="research", run_id=run_id)
    assert all(e.source_path == [step] and e.reply_id == agent.reply_id for e in nested)
    assert run_id and run_id != agent.reply_id
    kinds = [e.type for e in nested]
    assert kinds[0] == "reply_start" and kinds[-1] == "reply_end"
    assert "tool_call_start" in kinds and "tool_result_end" in kinds
    mine = own(events)
    assert [e.type for e in mine].count("reply_end") == 1 and events[-1].type == "reply_end"
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    start = next(
        i for i, e in enumerate(events) if e.type == "tool_result_start" and not e.source_path
    )
    end = next(i for i, e in enumerate(events) if e.type == "tool_result_end" and not e.source_path)
    assert start < events.index(nested[0]) and events.index(nested[-1]) < end


async def test_a_fork_with_context_sees_the_conversation_on_both_kinds(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    sub = Recorded(["You asked about Oslo, then about layers."])
    mw = await attach(SkillsMiddleware(skills, model=sub.model))
    agent = Agent(
        ScriptedChatModel(
            [
                "Oslo is cold.",
                ScriptedTurn(
                    text="Let me recap.",
                    tool_calls=[("skill", {"name": "recap", "task": "Recap for the user."})],
                ),
                "Here is the recap.",
            ]
        ),
        kind=kind,
        middlewares=[mw],
    )
    await collect(agent.reply("Tell me about Oslo."))
    agent.state.context.append(make_hint(kind, "a passing hint", "other", id="hint-1"))
    await collect(agent.reply("And layers?"))
    prompt = sub.prompts[0]
    assert is_system(prompt[0]) and text_of(prompt[0]) == "Recap what was said."
    assert [(m.role, text_of(m)) for m in prompt[1:]] == [
        ("user", "Tell me about Oslo."),
        ("assistant", "Oslo is cold."),
        ("user", "And layers?"),
        ("user", "Recap for the user."),
    ]
    assert all(m.kind == kind for m in prompt)
    if kind == "agentic":
        assert all(isinstance(m, AgenticMessage) for m in prompt)
    assert results(agent)["call_1"].text == "You asked about Oslo, then about layers."


async def test_sub_agent_usage_counts_toward_the_parents_budget(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    heavy = Usage(input_tokens=900, output_tokens=100)
    sub = Recorded(["It is 42."], usage=heavy)
    budget = await attach(BudgetMiddleware(token_budget=500))
    mw = await attach(SkillsMiddleware(skills, model=sub.model, tools=[read_notes]))
    light = Usage(input_tokens=10, output_tokens=10)
    parent = Recorded(
        [
            ScriptedTurn(tool_calls=[("skill", {"name": "research", "task": "x?"})], usage=light),
            ScriptedTurn(
                tool_calls=[("skill", {"name": "research", "task": "again"})], usage=light
            ),
        ]
    )
    agent = Agent(parent.model, kind=kind, middlewares=[budget, mw])
    await collect(agent.reply("go"))
    assert parent.choices == ["auto", "none"]  # 20 own tokens + 1000 nested > 500


async def test_fork_problems_are_error_results_and_the_reply_goes_on(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    failing = ScriptedChatModel([ScriptedTurn(error="model down")])
    mw = await attach(SkillsMiddleware(skills, model=failing, tools=[read_notes]))
    agent = Agent(
        ScriptedChatModel(
            calls(
                [("skill", {"name": "research"})],
                [("skill", {"name": "careful", "task": "t"})],
                [("skill", {"name": "research", "task": "t"})],
            )
        ),
        kind=kind,
        middlewares=[mw],
    )
    events = await collect(agent.reply("go"))
    got = results(agent)
    assert "give it the task in `task`" in got["call_1"].text
    assert "asks for model 'nonexistent', which is not configured" in got["call_2"].text
    assert got["call_3"].text.startswith("Error: the sub-agent research ended with error")
    assert "model down" in got["call_3"].text
    assert all(r.state == "error" for r in got.values())
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


@tool(needs_confirmation=True)
def launch(target: str) -> str:
    """Launch something (needs a person's yes).

    Args:
        target: What to launch.
    """
    return f"launched {target}"


def _launcher(skills: Path, sub: Recorded, parent: Recorded, fired: list[str]) -> Agent:
    @tool(needs_confirmation=True)
    def launch(target: str) -> str:
        """Launch something (needs a person's yes).

        Args:
            target: What to launch.
        """
        fired.append(target)
        return f"launched {target}"

    if not (skills / "launcher").exists():
        _skill(skills, "launcher", "Launches.", "Launch things.", context="fork", tools="[launch]")
    mw = SkillsMiddleware(skills, model=sub.model, tools=[launch])
    return Agent(parent.model, middlewares=[mw])


async def test_a_forks_ask_pauses_the_reply_and_its_call_runs_once_approved(
    kind: MessageKind, skills: Path
) -> None:
    fired: list[str] = []
    sub = Recorded([ScriptedTurn(tool_calls=[("launch", {"target": "rocket"})])])
    parent = Recorded(_fork_parent("launcher", "launch it"))
    agent = _launcher(skills, sub, parent, fired)
    agent.kind = kind
    events = await collect(agent.reply("go"))

    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == "confirm_skill"
    arguments = json.loads(confirm.arguments)
    assert arguments["skill"] == "launcher" and arguments["path"] == ["launcher"]
    assert [a["tool"] for a in arguments["asks"]] == ["launch"]
    (deep,) = [e for e in events if e.type == "require_user_confirm" and e.source_path]
    assert [s.agent_name for s in deep.source_path] == ["launcher"]  # type: ignore[union-attr]
    assert "confirm_skill" not in parent.tools[0]  # hidden from the model
    assert fired == []

    # Another process: the state as JSON, a new middleware (the models play the rest).
    saved = agent.state.model_dump_json()
    again = _launcher(skills, Recorded(["Launched the rocket."]), Recorded(["Done."]), fired)
    again.kind = kind
    again.state = AgentState.model_validate_json(saved)
    yes = Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)])
    resumed = await collect(again.resume(yes))

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert fired == ["rocket"]  # the sub-agent's call ran exactly once
    assert results(again)[confirm.id].text == "Launched the rocket."
    ran = [e for e in resumed if e.type == "tool_result_end" and e.source_path]
    assert [(e.source_path[0].agent_name, e.state) for e in ran] == [("launcher", "success")]  # type: ignore[union-attr, index]
    assert text_of(again.final_message) == "Done."  # type: ignore[arg-type]


async def test_rejecting_a_forks_ask_drops_its_run(kind: MessageKind, skills: Path) -> None:
    fired: list[str] = []
    sub = Recorded([ScriptedTurn(tool_calls=[("launch", {"target": "rocket"})])])
    parent = Recorded([*_fork_parent("launcher", "launch it")[:1], "Not launched."])
    agent = _launcher(skills, sub, parent, fired)
    agent.kind = kind
    events = await collect(agent.reply("go"))
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    no = Confirmation(call_id=asked.tool_calls[0].id, confirmed=False, reason="not now")  # type: ignore[union-attr]
    resumed = await collect(agent.resume(Resume(confirmations=[no])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert fired == [] and sub.model.calls == 1
    assert results(agent)[no.call_id].state == "denied"


async def test_in_a_sidecar_a_forks_ask_is_denied(kind: MessageKind, skills: Path) -> None:
    """A sidecar has no toolkit to pause the reply with: the sub-agent's call is denied and
    it goes on."""
    from hookmesh.remote import RemoteMiddleware, serve_middleware

    _skill(skills, "launcher", "Launches.", "Launch things.", context="fork", tools="[launch]")
    sub = Recorded([ScriptedTurn(tool_calls=[("launch", {"target": "rocket"})]), "Could not."])
    server = await serve_middleware(SkillsMiddleware(skills, model=sub.model, tools=[launch]))
    mw = await RemoteMiddleware.connect(f"127.0.0.1:{server.port}", timeout=10.0)
    try:
        parent = ScriptedChatModel(_fork_parent("launcher", "launch it"))
        events = await collect(Agent(parent, kind=kind, middlewares=[mw]).reply("go"))
    finally:
        await mw.aclose()
        await server.stop(None)
    denied = [e for e in events if e.source_path and e.type == "tool_result_end"]
    assert [e.state for e in denied] == ["denied"]  # type: ignore[attr-defined]
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_without_a_model_a_fork_uses_the_agents_own_in_process(
    kind: MessageKind, skills: Path
) -> None:
    model = ScriptedChatModel(
        [ScriptedTurn(tool_calls=[("skill", {"name": "recap", "task": "recap"})]), "sub", "done"]
    )
    agent = Agent(model, kind=kind, middlewares=[SkillsMiddleware(skills)])
    await collect(agent.reply("go"))
    assert results(agent)["call_1"].text == "sub" and model.calls == 3


async def test_interrupting_the_parent_stops_the_sub_agent(kind: MessageKind, skills: Path) -> None:
    sub = ScriptedChatModel(["x" * 400], stream=True, chunk_size=1, delay=0.01)
    mw = SkillsMiddleware(skills, model=sub, tools=[read_notes])
    agent = Agent(ScriptedChatModel(_fork_parent("research", "x")), kind=kind, middlewares=[mw])
    seen: list[Any] = []
    async with asyncio.timeout(10):
        async for event in agent.reply("go"):
            seen.append(event)
            if event.source_path and event.type == "text_block_delta":
                agent.interrupt()
    assert seen[-1].type == "reply_end" and seen[-1].finish_reason == "interrupted"
    assert sum(1 for e in seen if e.source_path and e.type == "text_block_delta") < 50
    assert results(agent)["call_1"].state == "interrupted"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "gpt"}, "model must be a ChatModel"),
        ({"models": {"a": 1}}, "a must be a ChatModel"),
        ({"max_iters": 0}, "max_iters must be an int >= 1"),
        ({"fork_token_budget": 0}, "fork_token_budget must be an int >= 1 or None"),
        ({"context_forks": 1}, "context_forks must be a bool"),
        ({"max_chars": 10}, "max_chars must be an int >= 100"),
        ({"failure_mode": "open"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SkillsMiddleware(tmp_path, **kwargs)


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("skills.md") == parameters(SkillsMiddleware)


class _DropOwnEnd(Middleware):
    """Swallows the reply's own reply_end (the core then ends the stream itself)."""

    async def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        async for event in next_handler():
            if event.type != "reply_end" or event.source_path:
                yield event


async def test_a_nested_reply_end_never_counts_as_the_replys_end(
    kind: MessageKind, skills: Path
) -> None:
    sub = ScriptedChatModel(["sub answer"])
    mw = SkillsMiddleware(skills, model=sub, tools=[read_notes])
    agent = Agent(
        ScriptedChatModel(_fork_parent("research", "x")), kind=kind, middlewares=[_DropOwnEnd(), mw]
    )
    events = await collect(agent.reply("go"))
    assert [e.type for e in events if e.type == "reply_end"] == ["reply_end", "reply_end"]
    assert events[-1].type == "reply_end" and not events[-1].source_path
    assert agent.last_finish_reason == "completed"


async def test_a_fork_token_budget_bounds_the_sub_agent(kind: MessageKind, skills: Path) -> None:
    sub = Recorded([ScriptedTurn(tool_calls=[("read_notes", {"topic": "x"})]), "short"])
    mw = SkillsMiddleware(skills, model=sub.model, tools=[read_notes], fork_token_budget=1)
    agent = Agent(ScriptedChatModel(_fork_parent("research", "x")), kind=kind, middlewares=[mw])
    await collect(agent.reply("go"))
    assert sub.choices == ["auto", "none"] and results(agent)["call_1"].text == "short"


async def test_a_forked_skill_is_bound_by_the_parents_propagated_limit(
    kind: MessageKind, attach: Attach, skills: Path
) -> None:
    lookups = ScriptedTurn(tool_calls=[("read_notes", {"topic": t}) for t in "abc"])
    sub = Recorded([lookups, "Found some."])
    mw = await attach(SkillsMiddleware(skills, model=sub.model, tools=[read_notes]))
    agent = Agent(
        ScriptedChatModel(_fork_parent("research", "What is x?")),
        kind=kind,
        middlewares=[PropagatedLimitMiddleware(3), mw],
    )
    await collect(agent.reply("what is x?"))
    # the skill call took 1 of 3; the fork reserved the 2 left
    states = [r.state for m in sub.prompts[1] for r in tool_results(m)]
    assert states == ["success", "success", "denied"]


async def test_served_from_a_sidecar_it_costs_no_round_trip_per_model_call(skills: Path) -> None:
    """A sidecar cannot pause, so the pause hook (called before every model call) and its
    hidden confirmation tool are not served: only the listing and the skill tool."""
    from hookmesh.remote import RemoteMiddleware, serve_middleware

    server = await serve_middleware(SkillsMiddleware(skills, model=Recorded([]).model))
    mw = await RemoteMiddleware.connect(f"127.0.0.1:{server.port}", timeout=10.0)
    try:
        assert sorted(mw.describe().hooks) == ["on_system_prompt"]
        assert [t.name for t in mw.list_tools()] == ["skill"]
    finally:
        await mw.aclose()
        await server.stop(None)
