"""A local sub-agent's external calls pause the top reply: a supervisor's worker (also two
levels down), a handoff's receiver, a plan step's worker and the planner, and a skill's fork
end ``awaiting_external_execution``; the top reply pauses on ``external_<name>`` calls (one
per call, with the path and the tool to run), and the caller's results, given to a new agent
on the saved state (another process), reach the sub-agent that called. Both kinds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, external_tool, tool
from hookmesh.middleware.builtin.handoff import HANDOFF_METADATA_KEY, Handoff, HandoffMiddleware
from hookmesh.middleware.builtin.plan_execute import (
    EXECUTE_TOOL,
    EXTERNAL_TOOL,
    PLANNER_NAME,
    plan_execute,
)
from hookmesh.middleware.builtin.skills import SkillsMiddleware
from hookmesh.middleware.builtin.supervisor import SupervisorMiddleware, Worker, supervisor
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    Confirmation,
    ExternalResult,
    MessageKind,
    Resume,
    ToolCall,
    text_of,
    tool_results,
)
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls, own, results

pytestmark = pytest.mark.timeout(60)

LOCATE = external_tool(
    "locate",
    "Where the user is (the user's device answers).",
    {"type": "object", "properties": {"precision": {"type": "string"}}},
)


def _paused(events: list[AgentEvent]) -> list[ToolCall]:
    """The calls the top reply pauses on (it must end awaiting external execution)."""
    assert events[-1].finish_reason == "awaiting_external_execution"  # type: ignore[union-attr]
    (asked,) = own([e for e in events if e.type == "require_external_execution"])
    return list(asked.tool_calls)  # type: ignore[union-attr]


def _deep(events: list[AgentEvent]) -> list[tuple[list[str], list[str]]]:
    """The nested external-execution requests: the path to the agent and its calls' names."""
    return [
        ([s.agent_name for s in e.source_path or ()], [c.name for c in e.tool_calls])  # type: ignore[union-attr]
        for e in events
        if e.type == "require_external_execution" and e.source_path
    ]


def _seen(model: Recorded) -> dict[str, str]:
    """The tool results the model's first call saw, text by tool name and call id."""
    return {f"{r.name}:{r.call_id}": r.text for m in model.prompts[0] for r in tool_results(m)}


def _again(agent: Agent, other: Agent) -> Agent:
    """`other` (a new agent, as another process builds it) on `agent`'s state, as JSON."""
    other.kind = agent.kind
    other.state = AgentState.model_validate_json(agent.state.model_dump_json())
    return other


def _team(boss: Recorded, ops: Recorded, scout: Recorded) -> Agent:
    """A supervisor whose worker ``ops`` supervises ``scout``, who can call `LOCATE`."""
    scout_worker = Worker("scout", scout.model, "Finds the user.", tools=[LOCATE])
    ops_worker = Worker(
        "ops", ops.model, "Runs operations.", middlewares=[SupervisorMiddleware([scout_worker])]
    )
    return supervisor(boss.model, [ops_worker])


async def test_an_external_call_two_levels_down_pauses_the_top_and_gets_its_result(
    kind: MessageKind,
) -> None:
    boss = Recorded([ScriptedTurn(tool_calls=[("ask_ops", {"task": "Where is the user?"})])])
    ops = Recorded([ScriptedTurn(tool_calls=[("ask_scout", {"task": "Locate the user."})])])
    scout = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "city"})])])
    agent = _team(boss, ops, scout)
    agent.kind = kind
    events = await collect(agent.reply("Where am I?"))

    (top,) = _paused(events)
    arguments = json.loads(top.arguments)
    assert top.name == "external_ops"
    assert arguments["worker"] == "ops" and arguments["path"] == ["ops", "scout"]
    assert arguments["tool"] == "locate"  # the innermost tool, to run as it is
    assert json.loads(arguments["arguments"]) == {"precision": "city"}
    assert _deep(events) == [(["ops", "scout"], ["locate"]), (["ops"], ["external_scout"])]
    assert "external_ops" not in boss.tools[0]  # hidden from the model
    assert "waits for the results of external calls" in results(agent)["call_1"].text

    # Another process: a new team on the saved state (the models play the rest).
    boss2, ops2 = Recorded(["You are in Oslo."]), Recorded(["Ops: the user is in Oslo."])
    scout2 = Recorded(["The user is in Oslo."])
    again = _again(agent, _team(boss2, ops2, scout2))
    got = ExternalResult(call_id=top.id, output="Oslo, Norway")
    resumed = await collect(again.resume(Resume(external_results=[got])))

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    (scout_saw,) = _seen(scout2).values()  # the scout's own call got the caller's result
    assert scout_saw == "Oslo, Norway"
    assert [r.state for m in scout2.prompts[0] for r in tool_results(m)] == ["success"]
    answers = [r for r in results(again).values() if r.name == "ask_ops"]
    assert answers[-1].text == "Ops: the user is in Oslo."  # the stand-in call's result
    assert text_of(again.final_message) == "You are in Oslo."  # type: ignore[arg-type]
    assert len(boss2.prompts) == 1  # the model was called once, after the worker answered


async def test_each_external_call_gets_its_own_result(kind: MessageKind) -> None:
    step = ScriptedTurn(
        tool_calls=[("locate", {"precision": "city"}), ("locate", {"precision": "street"})]
    )
    scout = Recorded([step])
    boss = Recorded([ScriptedTurn(tool_calls=[("ask_scout", {"task": "Locate."})])])
    worker = Worker("scout", scout.model, "Finds the user.", tools=[LOCATE])
    agent = supervisor(boss.model, [worker])
    agent.kind = kind
    events = await collect(agent.reply("Where am I?"))
    first, second = _paused(events)
    precision = {c.id: json.loads(json.loads(c.arguments)["arguments"]) for c in (first, second)}
    assert precision == {first.id: {"precision": "city"}, second.id: {"precision": "street"}}

    scout2 = Recorded(["Oslo, Karl Johans gate."])
    worker2 = Worker("scout", scout2.model, "Finds the user.", tools=[LOCATE])
    again = _again(agent, supervisor(Recorded(["Found you."]).model, [worker2]))
    given = [  # in another order than asked
        ExternalResult(call_id=second.id, output="Karl Johans gate"),
        ExternalResult(call_id=first.id, output="Oslo"),
    ]
    resumed = await collect(again.resume(Resume(external_results=given)))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    (deep,) = [e for e in events if e.type == "require_external_execution" and e.source_path]
    city, street = (c.id for c in deep.tool_calls)  # type: ignore[union-attr]
    seen = {r.call_id: r.text for m in scout2.prompts[0] for r in tool_results(m)}
    assert seen == {city: "Oslo", street: "Karl Johans gate"}


def _billing(parent: Recorded, receiver: Recorded, hand_back: bool = False) -> Agent:
    billing = Handoff("billing", receiver.model, "Refunds.", tools=[LOCATE], hand_back=hand_back)
    return Agent(parent.model, middlewares=[HandoffMiddleware([billing])])


@pytest.mark.parametrize("hand_back", [False, True])
async def test_a_receivers_external_call_pauses_the_reply_and_its_answer_follows(
    kind: MessageKind, hand_back: bool
) -> None:
    transfer = ScriptedTurn(tool_calls=[("transfer_to_billing", {"message": "Refund 7."})])
    receiver = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "country"})])])
    agent = _billing(Recorded([transfer]), receiver, hand_back)
    agent.kind = kind
    events = await collect(agent.reply("Refund order 7."))
    (top,) = _paused(events)
    arguments = json.loads(top.arguments)
    assert top.name == "external_billing" and arguments["agent"] == "billing"
    assert arguments["path"] == ["billing"] and arguments["tool"] == "locate"
    assert _deep(events) == [(["billing"], ["locate"])]

    parent, receiver2 = Recorded(["The refund is on its way."]), Recorded(["Refunded in NOK."])
    again = _again(agent, _billing(parent, receiver2, hand_back))
    given = Resume(external_results=[ExternalResult(call_id=top.id, output="Norway")])
    resumed = await collect(again.resume(given))

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert list(_seen(receiver2).values()) == ["Norway"]
    user = [text_of(m) for m in receiver2.prompts[0] if m.role == "user" and text_of(m)]
    assert user[-1] == "Refund 7."  # it goes on from its own conversation
    final = again.final_message
    assert final is not None
    if hand_back:
        assert text_of(final) == "The refund is on its way."
    else:  # the stand-in transfer ends the reply with the receiver's answer
        assert text_of(final) == "Refunded in NOK." and parent.prompts == []
        assert final.name == "billing"
        assert final.metadata[HANDOFF_METADATA_KEY]["agent"] == "billing"  # type: ignore[index]


def _locating_plan(planner: Recorded, scout: Recorded, writer: Recorded, model: Recorded) -> Agent:
    planner.model.native_output = True
    workers = [
        Worker("scout", scout.model, "Finds the user.", tools=[LOCATE]),
        Worker("writer", writer.model, "Writes."),
    ]
    return plan_execute(model.model, workers, planner_model=planner.model, planner_tools=[LOCATE])


def _plan(*steps: tuple[str, str]) -> Recorded:
    plan = {"steps": [{"worker": w, "task": t} for w, t in steps]}
    return Recorded([json.dumps(plan)])


async def test_a_plan_steps_external_call_pauses_the_reply_and_the_plan_goes_on(
    kind: MessageKind,
) -> None:
    planner = _plan(("scout", "Locate the user."), ("writer", "Greet the user's city."))
    scout = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "city"})])])
    agent = _locating_plan(planner, scout, Recorded([]), Recorded([]))
    agent.kind = kind
    events = await collect(agent.reply("Greet me."))
    (top,) = _paused(events)
    arguments = json.loads(top.arguments)
    assert top.name == EXTERNAL_TOOL and arguments["path"] == ["scout"]
    assert arguments["tool"] == "locate"

    writer, model = Recorded(["Hei, Oslo!"]), Recorded(["Hei, Oslo!"])
    again = _again(agent, _locating_plan(_plan(), Recorded(["In Oslo."]), writer, model))
    given = Resume(external_results=[ExternalResult(call_id=top.id, output="Oslo")])
    resumed = await collect(again.resume(given))

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    reports = [r for r in results(again).values() if r.name == EXECUTE_TOOL]
    assert reports[-1].text.startswith("The plan is done (2 steps, 0 re-plans).")
    assert "Step 1 — scout: Locate the user.\nIn Oslo." in reports[-1].text
    assert "In Oslo." in text_of(writer.prompts[0][-1])  # the next step ran after it
    assert EXTERNAL_TOOL not in model.tools[0] and EXECUTE_TOOL not in model.tools[0]
    assert text_of(again.final_message) == "Hei, Oslo!"  # type: ignore[arg-type]


async def test_the_planners_external_call_pauses_the_reply_and_its_plan_runs(
    kind: MessageKind,
) -> None:
    asks = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "city"})])])
    agent = _locating_plan(asks, Recorded([]), Recorded([]), Recorded([]))
    agent.kind = kind
    events = await collect(agent.reply("Greet me."))
    (top,) = _paused(events)
    assert json.loads(top.arguments)["path"] == [PLANNER_NAME]

    planner = _plan(("writer", "Greet Oslo."))
    writer, model = Recorded(["Hei, Oslo!"]), Recorded(["Done."])
    again = _again(agent, _locating_plan(planner, Recorded([]), writer, model))
    given = Resume(external_results=[ExternalResult(call_id=top.id, output="Oslo")])
    resumed = await collect(again.resume(given))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert list(_seen(planner).values()) == ["Oslo"]  # it planned from the result
    reports = [r for r in results(again).values() if r.name == EXECUTE_TOOL]
    assert "Hei, Oslo!" in reports[-1].text


def _skill_dir(root: Path) -> Path:
    folder = root / "finder"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: finder\ndescription: Finds the user.\ncontext: fork\n"
        "tools: [locate]\n---\nFind the user with locate.\n"
    )
    return root


async def test_a_forks_external_call_pauses_the_reply_and_its_answer_is_the_result(
    kind: MessageKind, tmp_path: Path
) -> None:
    root = _skill_dir(tmp_path / "skills")
    fork = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "city"})])])
    parent = Recorded(calls([("skill", {"name": "finder", "task": "Where is the user?"})]))
    agent = Agent(
        parent.model,
        kind=kind,
        middlewares=[SkillsMiddleware(root, model=fork.model, tools=[LOCATE])],
    )
    events = await collect(agent.reply("Where am I?"))
    (top,) = _paused(events)
    arguments = json.loads(top.arguments)
    assert top.name == "external_skill" and arguments["skill"] == "finder"
    assert arguments["path"] == ["finder"] and arguments["tool"] == "locate"
    assert "external_skill" not in parent.tools[0]

    fork2, parent2 = Recorded(["In Oslo."]), Recorded(["You are in Oslo."])
    skills = SkillsMiddleware(root, model=fork2.model, tools=[LOCATE])
    again = _again(agent, Agent(parent2.model, middlewares=[skills]))
    given = Resume(external_results=[ExternalResult(call_id=top.id, output="Oslo")])
    resumed = await collect(again.resume(given))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert list(_seen(fork2).values()) == ["Oslo"]
    answers = [r for r in results(again).values() if r.name == "skill"]
    assert answers[-1].text == "In Oslo."
    assert text_of(again.final_message) == "You are in Oslo."  # type: ignore[arg-type]


async def test_in_a_sidecar_a_forks_external_call_is_an_error_result(
    kind: MessageKind, tmp_path: Path
) -> None:
    """A sidecar has no toolkit to pause the reply with: the skill's call is an error result
    naming the external call, and the parent model goes on."""
    from hookmesh.remote import RemoteMiddleware, serve_middleware

    root = _skill_dir(tmp_path / "skills")
    fork = Recorded([ScriptedTurn(tool_calls=[("locate", {"precision": "city"})])])
    server = await serve_middleware(SkillsMiddleware(root, model=fork.model, tools=[LOCATE]))
    mw = await RemoteMiddleware.connect(f"127.0.0.1:{server.port}", timeout=10.0)
    try:
        parent = ScriptedChatModel(
            calls([("skill", {"name": "finder", "task": "Where?"})], answer="I cannot tell.")
        )
        agent = Agent(parent, kind=kind, middlewares=[mw])
        events = await collect(agent.reply("Where am I?"))
    finally:
        await mw.aclose()
        await server.stop(None)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = results(agent)["call_1"]
    assert result.state == "error"
    assert "waits for the results of external calls (locate)" in result.text
    assert "cannot pause" in result.text
    assert text_of(agent.final_message) == "I cannot tell."  # type: ignore[arg-type]


def test_an_unanswered_pause_reads_no_results() -> None:
    """`answered` runs before every model call: with no sub-agent waiting for results it
    must not walk the context (here, walking it fails)."""
    from collections.abc import Iterator

    from hookmesh.middleware.builtin._support._external import answered

    class Unread(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            raise AssertionError("the context was read with nothing waiting")

    assert answered({}, Unread()) == []


async def test_a_confirmation_and_an_external_call_of_one_step_pause_in_turn(
    kind: MessageKind,
) -> None:
    """Two workers of one step: one asks to confirm, one calls an external tool. The reply
    asks for the confirmation first, then pauses for the external result; each reaches its
    worker."""
    fired: list[str] = []

    @tool(needs_confirmation=True)
    def launch(target: str) -> str:
        """Launch something.

        Args:
            target: What.
        """
        fired.append(target)
        return f"launched {target}"

    both = ScriptedTurn(
        tool_calls=[("ask_pilot", {"task": "Launch."}), ("ask_scout", {"task": "Locate."})]
    )
    boss = Recorded([both, "Launched, and you are in Oslo."])
    pilot = Recorded([ScriptedTurn(tool_calls=[("launch", {"target": "rocket"})]), "Launched."])
    scout = Recorded([ScriptedTurn(tool_calls=[("locate", {})]), "In Oslo."])
    workers = [
        Worker("pilot", pilot.model, "Launches.", tools=[launch]),
        Worker("scout", scout.model, "Finds the user.", tools=[LOCATE]),
    ]
    agent = supervisor(boss.model, workers)
    agent.kind = kind
    events = await collect(agent.reply("Launch and locate."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = own([e for e in events if e.type == "require_user_confirm"])
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == "confirm_pilot"

    yes = Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)])
    (top,) = _paused(await collect(agent.resume(yes)))
    assert fired == ["rocket"] and top.name == "external_scout"
    got = Resume(external_results=[ExternalResult(call_id=top.id, output="Oslo")])
    resumed = await collect(agent.resume(got))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert fired == ["rocket"]
    assert [r.text for m in scout.prompts[1] for r in tool_results(m)] == ["Oslo"]
    assert text_of(agent.final_message) == "Launched, and you are in Oslo."  # type: ignore[arg-type]


async def test_under_a_tool_call_limit_the_pause_takes_its_calls_once(kind: MessageKind) -> None:
    """Ten calls in all: the transfer, the receiver's `locate`, the hidden external_billing
    call and the stand-in transfer take four, so the resumed receiver gets six of its ten
    lookups, and the report counts every call once."""
    from hookmesh.middleware.builtin.propagated_limits import (
        SPENT_EVENT,
        PropagatedLimitMiddleware,
    )

    @tool(read_only=True)
    def look(q: str) -> str:
        """Look something up.

        Args:
            q: What.
        """
        return f"found {q}"

    def front(parent: Recorded, receiver: Recorded) -> Agent:
        billing = Handoff("billing", receiver.model, "x", tools=[LOCATE, look], hand_back=True)
        limit = PropagatedLimitMiddleware(10, report=True)
        return Agent(parent.model, kind=kind, middlewares=[limit, HandoffMiddleware([billing])])

    transfer = ScriptedTurn(tool_calls=[("transfer_to_billing", {"message": "Look."})])
    receiver = Recorded([ScriptedTurn(tool_calls=[("locate", {})])])
    agent = front(Recorded([transfer]), receiver)
    (top,) = _paused(await collect(agent.reply("Go.")))

    lookups = ScriptedTurn(tool_calls=[("look", {"q": str(i)}) for i in range(10)])
    receiver2 = Recorded([lookups, "Looked."])
    again = _again(agent, front(Recorded(["Done."]), receiver2))
    given = Resume(external_results=[ExternalResult(call_id=top.id, output="Oslo")])
    resumed = await collect(again.resume(given))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    states = [r.state for m in receiver2.prompts[1] for r in tool_results(m)]
    assert states == ["success"] + ["success"] * 6 + ["denied"] * 4  # locate, then lookups
    (report,) = [e for e in resumed if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 10  # type: ignore[union-attr]


async def test_with_the_tool_call_limit_spent_the_pause_is_denied_and_the_parent_goes_on(
    kind: MessageKind,
) -> None:
    """Two calls in all: the transfer and the receiver's `locate` take them, so the hidden
    external_billing call is denied (no pause) and so is the stand-in transfer; the
    receiver's run is dropped and the parent model answers."""
    from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware

    billing = Handoff(
        "billing",
        Recorded([ScriptedTurn(tool_calls=[("locate", {})])]).model,
        "x",
        tools=[LOCATE],
        hand_back=True,
    )
    transfer = ScriptedTurn(tool_calls=[("transfer_to_billing", {"message": "Look."})])
    parent = Recorded([transfer, "I could not ask you."])
    limit = PropagatedLimitMiddleware(2)
    agent = Agent(parent.model, kind=kind, middlewares=[limit, HandoffMiddleware([billing])])
    events = await collect(agent.reply("Go."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert not own([e for e in events if e.type == "require_external_execution"])
    by_name = {r.name: r.state for r in results(agent).values()}
    assert by_name["external_billing"] == "denied"
    assert [r.state for r in results(agent).values() if r.name == "transfer_to_billing"] == [
        "success",
        "denied",
    ]
    assert text_of(agent.final_message) == "I could not ask you."  # type: ignore[arg-type]
