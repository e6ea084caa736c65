"""Supervisor and plan-execute on the one Agent loop: the supervisor's workers run in parallel
under its calls and it merges their answers; plan-execute asks for a typed plan, runs its
steps with workers, and plans again after a failed step. Both kinds, scripted models."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hookmesh.agent import AgentState, tool
from hookmesh.middleware.builtin.plan_execute import (
    CONFIRM_TOOL,
    EXECUTE_TOOL,
    PLANNER_NAME,
    Plan,
    plan_execute,
)
from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware
from hookmesh.middleware.builtin.supervisor import (
    ROUTING_PROMPT,
    SupervisorMiddleware,
    Worker,
    supervisor,
)
from hookmesh.models import ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    Confirmation,
    MessageKind,
    Resume,
    text_of,
    tool_results,
)
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, results

pytestmark = pytest.mark.timeout(60)


def _by_agent(events: list[AgentEvent]) -> dict[str, list[str]]:
    """The types of the nested events, by the agent on the path's first entry."""
    out: dict[str, list[str]] = {}
    for e in events:
        if e.source_path:
            out.setdefault(e.source_path[0].agent_name, []).append(e.type)
    return out


async def test_a_supervisor_routes_to_workers_in_parallel_and_merges(kind: MessageKind) -> None:
    # Each worker's tool waits for the other's: they only finish if they run at once.
    met = {"research": asyncio.Event(), "writer": asyncio.Event()}

    def meeting(mine: str, other: str) -> Any:
        @tool(read_only=True, name=f"meet_{mine}")
        async def meet() -> str:
            """Wait for the other worker."""
            met[mine].set()
            await met[other].wait()
            return "met"

        return meet

    research = Recorded(
        [ScriptedTurn(tool_calls=[("meet_research", {})]), "Oslo had 40 rainy days."]
    )
    writing = Recorded([ScriptedTurn(tool_calls=[("meet_writer", {})]), "A haiku about rain."])
    boss = Recorded(
        [
            ScriptedTurn(
                tool_calls=[
                    ("ask_research", {"task": "Count rainy days in Oslo."}),
                    ("ask_writer", {"task": "Write a haiku about rain."}),
                ]
            ),
            "Merged: 40 rainy days, and a haiku.",
        ]
    )
    agent = supervisor(
        boss.model,
        [
            Worker(
                "research", research.model, "Finds facts.", tools=[meeting("research", "writer")]
            ),
            Worker("writer", writing.model, "Writes verse.", tools=[meeting("writer", "research")]),
        ],
    )
    agent.kind = kind
    events = await collect(agent.reply("Rain report, please."), timeout=10)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    system = text_of(boss.prompts[0][0])
    assert ROUTING_PROMPT in system and "- research: Finds facts." in system
    assert boss.tools[0] == ["ask_research", "ask_writer"]
    # Each worker saw only its task.
    assert [text_of(m) for m in research.prompts[0] if m.role == "user"] == [
        "Count rainy days in Oslo."
    ]
    got = results(agent)
    assert got["call_1"].text == "Oslo had 40 rainy days."
    assert got["call_2"].text == "A haiku about rain."
    nested = _by_agent(events)
    assert nested["research"][0] == "reply_start" and nested["writer"][-1] == "reply_end"
    merged = [r.text for m in boss.prompts[1] for r in tool_results(m)]
    assert merged == ["Oslo had 40 rainy days.", "A haiku about rain."]
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "Merged: 40 rainy days, and a haiku."


async def test_a_supervisors_workers_share_its_tool_call_pool(kind: MessageKind) -> None:
    @tool(read_only=True)
    def look(q: str) -> str:
        """Look something up.

        Args:
            q: What.
        """
        return f"found {q}"

    calls = ScriptedTurn(tool_calls=[("look", {"q": str(i)}) for i in range(3)])
    research = Recorded([calls, "done"])
    boss = Recorded([ScriptedTurn(tool_calls=[("ask_research", {"task": "Look."})]), "ok"])
    agent = supervisor(
        boss.model,
        [Worker("research", research.model, "Finds facts.", tools=[look])],
        middlewares=[PropagatedLimitMiddleware(3)],
    )
    agent.kind = kind
    await collect(agent.reply("Go."))
    states = [r.state for m in research.prompts[1] for r in tool_results(m)]
    assert states == ["success", "success", "denied"]  # 1 of 3 went to ask_research


def _planner(*plans: dict[str, Any]) -> Recorded:
    return Recorded([json.dumps(p) for p in plans])


async def test_plan_execute_runs_the_typed_plan_and_answers_from_it(kind: MessageKind) -> None:
    planner = _planner(
        {
            "steps": [
                {"worker": "research", "task": "Find the rainiest month."},
                {"worker": "writer", "task": "Write one line about it."},
            ]
        }
    )
    planner.model.native_output = True
    research = Recorded(["October."])
    writing = Recorded(["October pours."])
    model = Recorded(["Answer: October pours."])
    agent = plan_execute(
        model.model,
        [
            Worker("research", research.model, "Finds facts."),
            Worker("writer", writing.model, "Writes verse."),
        ],
        planner_model=planner.model,
    )
    agent.kind = kind
    events = await collect(agent.reply("Tell me about the rainiest month."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # The planner got the request; the model never saw the execute tool.
    assert text_of(planner.prompts[0][-1]) == "Tell me about the rainiest month."
    assert EXECUTE_TOOL not in model.tools[0]
    # The second step sees the first's result.
    assert "October." in text_of(writing.prompts[0][-1])
    (execution,) = results(agent).values()
    assert execution.name == EXECUTE_TOOL
    assert execution.text.startswith("The plan is done (2 steps, 0 re-plans).")
    assert "Step 2 — writer: Write one line about it.\nOctober pours." in execution.text
    assert list(_by_agent(events)) == [PLANNER_NAME, "research", "writer"]
    assert text_of(agent.final_message) == "Answer: October pours."  # type: ignore[arg-type]


async def test_plan_execute_plans_again_after_a_failed_step(kind: MessageKind) -> None:
    planner = _planner(
        {"steps": [{"worker": "fast", "task": "Fetch A."}, {"worker": "fast", "task": "Fetch B."}]},
        {"steps": [{"worker": "slow", "task": "Fetch B the slow way."}]},
    )
    planner.model.native_output = True
    fast = Recorded(["A fetched.", ScriptedTurn(error="the fast path is down")])
    slow = Recorded(["B fetched slowly."])
    model = Recorded(["A and B."])
    agent = plan_execute(
        model.model,
        [Worker("fast", fast.model, "Fetches fast."), Worker("slow", slow.model, "Fetches.")],
        planner_model=planner.model,
    )
    agent.kind = kind
    events = await collect(agent.reply("Fetch A and B."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    replan = text_of(planner.prompts[1][-1])
    assert "Step 1 — fast: Fetch A.\nA fetched." in replan
    assert "step 'fast' (Fetch B.) failed" in replan and "the fast path is down" in replan
    (execution,) = results(agent).values()
    assert execution.text.startswith("The plan is done (2 steps, 1 re-plans).")
    assert "Step 2 — slow: Fetch B the slow way.\nB fetched slowly." in execution.text


async def test_plan_execute_gives_up_after_its_replans(kind: MessageKind) -> None:
    bad = {"steps": [{"worker": "nobody", "task": "Do it."}]}
    planner = _planner(bad, bad)
    planner.model.native_output = True
    model = Recorded(["I could not do it."])
    agent = plan_execute(
        model.model,
        [Worker("fast", Recorded(["x"]).model, "Fetches fast.")],
        planner_model=planner.model,
        max_replans=1,
    )
    agent.kind = kind
    await collect(agent.reply("Do it."))
    (execution,) = results(agent).values()
    assert execution.text == (
        "The plan could not be completed after 1 re-plans: the plan named 'nobody', "
        "who is not a worker."
    )
    assert len(planner.prompts) == 2
    assert Plan.model_validate(bad).steps[0].worker == "nobody"


def _cleaning_team(boss: Recorded, ops: Recorded, janitor: Recorded, deleted: list[str]) -> Any:
    """A supervisor whose worker ``ops`` supervises the worker ``janitor``, whose ``delete``
    tool needs the user's confirmation."""

    @tool(needs_confirmation=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    janitor_worker = Worker("janitor", janitor.model, "Deletes files.", tools=[delete])
    ops_worker = Worker(
        "ops", ops.model, "Runs operations.", middlewares=[SupervisorMiddleware([janitor_worker])]
    )
    return supervisor(boss.model, [ops_worker])


async def test_an_ask_three_levels_down_pauses_the_top_and_resumes_elsewhere(
    kind: MessageKind,
) -> None:
    deleted: list[str] = []
    boss = Recorded([ScriptedTurn(tool_calls=[("ask_ops", {"task": "Clean up tmp."})])])
    ops = Recorded([ScriptedTurn(tool_calls=[("ask_janitor", {"task": "Delete tmp/a."})])])
    janitor = Recorded([ScriptedTurn(tool_calls=[("delete", {"path": "tmp/a"})])])
    agent = _cleaning_team(boss, ops, janitor, deleted)
    agent.kind = kind
    events = await collect(agent.reply("Clean up, please."))

    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == "confirm_ops"
    assert json.loads(confirm.arguments)["worker"] == "ops"
    assert json.loads(confirm.arguments)["path"] == ["ops", "janitor"]  # who asks
    (deep,) = [
        e for e in events if e.type == "require_user_confirm" and len(e.source_path or ()) == 2
    ]
    assert [s.agent_name for s in deep.source_path] == ["ops", "janitor"]  # type: ignore[union-attr]
    assert [c.name for c in deep.tool_calls] == ["delete"]  # type: ignore[union-attr]
    assert "tmp/a" in confirm.arguments and "confirm_janitor" in confirm.arguments
    assert "confirm_ops" not in boss.tools[0]  # hidden from the model
    assert deleted == []

    # Another process: the state as JSON, a new team (the models play the rest).
    saved = agent.state.model_dump_json()
    boss2 = Recorded(["Everything is clean."])
    ops2, janitor2 = Recorded(["Ops: tmp is clean."]), Recorded(["Deleted tmp/a."])
    again = _cleaning_team(boss2, ops2, janitor2, deleted)
    again.kind = kind
    again.state = AgentState.model_validate_json(saved)
    resumed = await collect(
        again.resume(Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)]))
    )

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert deleted == ["tmp/a"]  # the grandchild's tool ran exactly once
    assert results(again)[confirm.id].text == "Ops: tmp is clean."
    assert text_of(again.final_message) == "Everything is clean."  # type: ignore[arg-type]
    ran = [e for e in resumed if e.type == "tool_result_end" and len(e.source_path or ()) == 2]
    assert [(e.source_path[-1].agent_name, e.state) for e in ran] == [("janitor", "success")]  # type: ignore[index, union-attr]


async def test_rejecting_the_ask_denies_the_nested_calls(kind: MessageKind) -> None:
    deleted: list[str] = []
    boss = Recorded(
        [ScriptedTurn(tool_calls=[("ask_ops", {"task": "Clean up tmp."})]), "Left as is."]
    )
    ops = Recorded([ScriptedTurn(tool_calls=[("ask_janitor", {"task": "Delete tmp/a."})])])
    janitor = Recorded([ScriptedTurn(tool_calls=[("delete", {"path": "tmp/a"})])])
    agent = _cleaning_team(boss, ops, janitor, deleted)
    agent.kind = kind
    events = await collect(agent.reply("Clean up, please."))
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    no = Confirmation(call_id=asked.tool_calls[0].id, confirmed=False, reason="not now")  # type: ignore[union-attr]
    resumed = await collect(agent.resume(Resume(confirmations=[no])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert deleted == []
    assert results(agent)[no.call_id].state == "denied"


def _cleaning_plan(
    planner: Recorded, janitor: Recorded, writer: Recorded, model: Recorded, deleted: list[str]
) -> Any:
    """A plan-execute agent whose worker ``janitor`` has a `delete` that needs the user's
    confirmation, and whose worker ``writer`` reports."""

    @tool(needs_confirmation=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    planner.model.native_output = True
    workers = [
        Worker("janitor", janitor.model, "Deletes files.", tools=[delete]),
        Worker("writer", writer.model, "Writes reports."),
    ]
    return plan_execute(model.model, workers, planner_model=planner.model)


async def test_a_plan_steps_ask_pauses_the_reply_and_the_plan_goes_on_elsewhere(
    kind: MessageKind,
) -> None:
    plan = {
        "steps": [
            {"worker": "janitor", "task": "Delete tmp/a."},
            {"worker": "writer", "task": "Report what was deleted."},
        ]
    }
    deleted: list[str] = []
    janitor = Recorded([ScriptedTurn(tool_calls=[("delete", {"path": "tmp/a"})])])
    agent = _cleaning_plan(_planner(plan), janitor, Recorded([]), Recorded([]), deleted)
    agent.kind = kind
    events = await collect(agent.reply("Clean up and report."))

    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == CONFIRM_TOOL
    assert json.loads(confirm.arguments)["path"] == ["janitor"]
    (deep,) = [e for e in events if e.type == "require_user_confirm" and e.source_path]
    assert [s.agent_name for s in deep.source_path] == ["janitor"]  # type: ignore[union-attr]
    assert deleted == []

    saved = agent.state.model_dump_json()  # another process: a new agent on the saved state
    writer, model = Recorded(["Report: tmp/a is gone."]), Recorded(["All done."])
    again = _cleaning_plan(_planner(), Recorded(["Deleted tmp/a."]), writer, model, deleted)
    again.kind = kind
    again.state = AgentState.model_validate_json(saved)
    resumed = await collect(
        again.resume(Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)]))
    )

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert deleted == ["tmp/a"]  # the step's tool ran exactly once
    report = results(again)[confirm.id].text
    assert report.startswith("The plan is done (2 steps, 0 re-plans).")
    assert "Step 1 — janitor: Delete tmp/a.\nDeleted tmp/a." in report
    assert "Deleted tmp/a." in text_of(writer.prompts[0][-1])  # the next step sees the result
    assert CONFIRM_TOOL not in model.tools[0] and EXECUTE_TOOL not in model.tools[0]
    assert text_of(again.final_message) == "All done."  # type: ignore[arg-type]


async def test_rejecting_a_plan_steps_ask_drops_the_plan(kind: MessageKind) -> None:
    plan = {"steps": [{"worker": "janitor", "task": "Delete tmp/a."}]}
    deleted: list[str] = []
    janitor = Recorded([ScriptedTurn(tool_calls=[("delete", {"path": "tmp/a"})])])
    model = Recorded(["Left as is."])
    agent = _cleaning_plan(_planner(plan), janitor, Recorded([]), model, deleted)
    agent.kind = kind
    events = await collect(agent.reply("Clean up."))
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    no = Confirmation(call_id=asked.tool_calls[0].id, confirmed=False, reason="not now")  # type: ignore[union-attr]
    resumed = await collect(agent.resume(Resume(confirmations=[no])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert deleted == []
    assert results(agent)[no.call_id].state == "denied"


def _looking_plan(planner: Recorded, writer: Recorded, model: Recorded, looked: list[str]) -> Any:
    """A plan-execute agent whose planner may call `survey`, which needs the user's
    confirmation, and whose worker ``writer`` reports."""

    @tool(needs_confirmation=True)
    def survey(area: str) -> str:
        """Survey an area before planning (it costs money, so a person says yes).

        Args:
            area: Where to look.
        """
        looked.append(area)
        return f"{area}: 3 stale files"

    planner.model.native_output = True
    workers = [Worker("writer", writer.model, "Writes reports.")]
    return plan_execute(model.model, workers, planner_model=planner.model, planner_tools=[survey])


async def test_the_planners_ask_pauses_the_reply_and_its_plan_runs_once_approved(
    kind: MessageKind,
) -> None:
    looked: list[str] = []
    asks = Recorded([ScriptedTurn(tool_calls=[("survey", {"area": "tmp"})])])
    agent = _looking_plan(asks, Recorded([]), Recorded([]), looked)
    agent.kind = kind
    events = await collect(agent.reply("Report on tmp."))

    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == CONFIRM_TOOL
    arguments = json.loads(confirm.arguments)
    assert arguments["worker"] == PLANNER_NAME and arguments["path"] == [PLANNER_NAME]
    (deep,) = [e for e in events if e.type == "require_user_confirm" and e.source_path]
    assert [s.agent_name for s in deep.source_path] == [PLANNER_NAME]  # type: ignore[union-attr]
    assert [c.name for c in deep.tool_calls] == ["survey"]  # type: ignore[union-attr]
    assert looked == []

    saved = agent.state.model_dump_json()  # another process: a new agent on the saved state
    plan = {"steps": [{"worker": "writer", "task": "Report the stale files."}]}
    planner = _planner(plan)
    writer, model = Recorded(["Report: 3 stale files."]), Recorded(["All done."])
    again = _looking_plan(planner, writer, model, looked)
    again.kind = kind
    again.state = AgentState.model_validate_json(saved)
    yes = Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)])
    resumed = await collect(again.resume(yes))

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert looked == ["tmp"]  # the planner's call ran exactly once
    (seen,) = tool_results(planner.prompts[0][-1])  # it planned from the result
    assert seen.text == "tmp: 3 stale files"
    report = results(again)[confirm.id].text
    assert report.startswith("The plan is done (1 steps, 0 re-plans).")
    assert "Report: 3 stale files." in report
    assert text_of(again.final_message) == "All done."  # type: ignore[arg-type]


async def test_rejecting_the_planners_ask_drops_the_plan(kind: MessageKind) -> None:
    looked: list[str] = []
    asks = Recorded([ScriptedTurn(tool_calls=[("survey", {"area": "tmp"})])])
    model = Recorded(["No plan then."])
    agent = _looking_plan(asks, Recorded([]), model, looked)
    agent.kind = kind
    events = await collect(agent.reply("Report on tmp."))
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    no = Confirmation(call_id=asked.tool_calls[0].id, confirmed=False, reason="not now")  # type: ignore[union-attr]
    resumed = await collect(agent.resume(Resume(confirmations=[no])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert looked == [] and asks.model.calls == 1
    assert results(agent)[no.call_id].state == "denied"
