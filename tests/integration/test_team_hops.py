"""Teams across A2A hops: a reply in this process asks a middle agent (its own process, agent
service behind an A2A server), which asks an inner one (another process). Limits: the
extension carries the remainder down and the spent back up; the inner run is stopped by the
pool the top set, and the top's deadline ends the inner run. Approvals: the inner agent's
confirmation pauses the top reply, survives a SIGKILL of the middle process, is approved
through a new middle process on the same stores, and the inner tool runs once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, Confirmation, Resume
from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware
from hookmesh.middleware.builtin.remote_agent import RemoteAgentMiddleware
from hookmesh.middleware.builtin.supervisor import Worker, supervisor
from hookmesh.schema import AgentEvent, ToolResultEndEvent
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls, results
from tests.durable_app import EFFECTS_ENV, effects
from tests.mesh_app import GATE_ENV, Gate
from tests.team_process import CONFIRMED_ENV, team_process
from tests.team_stack import asks, member

pytestmark = pytest.mark.timeout(120)
WAIT = 60.0
DENIED = "the tool-call limit of the top reply is spent"


def _record(note: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "record_effect", "arguments": {"note": note}}]}


@asynccontextmanager
async def _chain(folder: Path, inner_turns: list[Any], env: dict[str, str]) -> AsyncIterator[str]:
    """The inner agent (scripted `inner_turns`, the record_effect tool) and the middle one (asks
    the inner once, then answers); yields the middle's A2A URL."""
    async with AsyncExitStack() as stack:
        inner = member(folder, "inner", inner_turns, [])
        inner_url = (await stack.enter_async_context(team_process(inner, env))).url
        middle_turns = [
            {"tool_calls": [{"name": "inner", "arguments": {"message": "do the work"}}]},
            "The middle agent is done.",
        ]
        middle = member(folder, "middle", middle_turns, [asks("inner", inner_url)])
        yield (await stack.enter_async_context(team_process(middle, env))).url


def _ends(events: list[AgentEvent], depth: int) -> list[ToolResultEndEvent]:
    return [
        e
        for e in events
        if e.type == "tool_result_end" and len(e.source_path or ()) == depth  # type: ignore[misc]
    ]


def _texts(events: list[AgentEvent], depth: int) -> str:
    """All tool-result text streamed at `depth`, in order."""
    return "".join(
        e.text  # type: ignore[union-attr]
        for e in events
        if e.type == "tool_result_delta" and len(e.source_path or ()) == depth
    )


async def test_the_innermost_run_is_stopped_by_the_pool_the_top_set(tmp_path: Path) -> None:
    effects_file = str(tmp_path / "effects")
    inner_turns = [_record(str(i)) for i in range(4)] + ["The inner agent is done."]
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(
            _chain(tmp_path, inner_turns, {EFFECTS_ENV: effects_file})
        )
        remote = await stack.enter_async_context(
            RemoteAgentMiddleware([{"name": "middle", "url": url}])
        )
        rec = Recorded(
            calls(
                [("middle", {"message": "go"})],
                [("middle", {"message": "again"})],
                answer="All done.",
            )
        )
        agent = Agent(rec.model, middlewares=[PropagatedLimitMiddleware(4), remote])
        events = await collect(agent.reply("start"), timeout=WAIT)

    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    runs, _ = effects(effects_file)
    # 4 in all: the top's call of middle, middle's of inner, and 2 of inner's 4 attempts.
    assert len(runs) == 2, runs
    inner_results = _ends(events, 2)
    assert [e.state for e in inner_results] == ["success", "success", "denied", "denied"]
    assert DENIED in _texts(events, 2)
    first, second = results(agent)["call_1"], results(agent)["call_2"]
    assert "The middle agent is done." in first.text
    # What the callees spent came back: nothing is left for the top's second call.
    assert second.state == "denied" and DENIED in second.text
    assert "4 calls in all" in second.text


async def test_the_top_deadline_ends_the_innermost_run(tmp_path: Path) -> None:
    async with Gate(tmp_path / "gate.sock") as gate:
        env = {EFFECTS_ENV: str(tmp_path / "effects"), GATE_ENV: str(gate.path)}
        inner_turns = [_record("park"), "never said"]
        async with (
            _chain(tmp_path, inner_turns, env) as url,
            RemoteAgentMiddleware([{"name": "middle", "url": url}]) as remote,
        ):
            rec = Recorded(calls([("middle", {"message": "go"})], answer="never said"))
            limit = PropagatedLimitMiddleware(deadline_seconds=10.0)
            agent = Agent(rec.model, middlewares=[limit, remote])
            events = await collect(agent.reply("start"), timeout=WAIT)
            assert len(gate.arrivals) == 1  # the inner tool was running at the deadline

    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error is not None and end.error.reason == "DEADLINE_EXCEEDED"  # type: ignore[union-attr]
    deadline = end.error.metadata["deadline"]  # type: ignore[union-attr]
    # The same instant, to the millisecond, reached the inner agent, which ended first.
    middle_saw = _texts(events, 1)
    assert f"the deadline of the top reply ({deadline}) passed while agent inner ran" in middle_saw


async def test_an_inner_confirmation_reaches_the_top_and_survives_a_middle_restart(
    tmp_path: Path,
) -> None:
    confirmed = tmp_path / "confirmed"
    env = {CONFIRMED_ENV: str(confirmed)}
    inner_turns = [
        {"tool_calls": [{"name": "confirmed_effect", "arguments": {"note": "wipe"}}]},
        "The inner agent is done.",
    ]
    middle_turns = [
        {"tool_calls": [{"name": "inner", "arguments": {"message": "wipe it"}}]},
        "unused",
        "The middle agent is done.",
    ]
    async with AsyncExitStack() as stack:
        inner = member(tmp_path, "inner", inner_turns, [], per_reply=True)
        inner_url = (await stack.enter_async_context(team_process(inner, env))).url
        middle = member(tmp_path, "middle", middle_turns, [asks("inner", inner_url)], True)
        async with (
            team_process(middle, env) as first,
            RemoteAgentMiddleware([{"name": "middle", "url": first.url}]) as remote,
        ):
            model = Recorded(calls([("middle", {"message": "wipe"})])).model
            top = Agent(model, middlewares=[remote])
            events = await collect(top.reply("start"), timeout=WAIT)
            await first.kill()  # the middle agent's process dies while its reply is paused
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
        (call,) = asked.tool_calls  # type: ignore[union-attr]
        arguments = json.loads(call.arguments)
        assert call.name == "middle__confirm" and arguments["path"] == ["middle", "inner"]
        (deep,) = [
            e for e in events if e.type == "require_user_confirm" and len(e.source_path or ()) == 2
        ]
        assert [s.agent_name for s in deep.source_path] == ["middle", "inner"]  # type: ignore[union-attr]
        assert [c.name for c in deep.tool_calls] == ["confirmed_effect"]  # type: ignore[union-attr]
        assert not confirmed.exists()

        # A new middle process on the same stores, and the top resumed elsewhere from JSON.
        saved = top.state.model_dump_json()
        async with (
            team_process(middle, env) as second,
            RemoteAgentMiddleware([{"name": "middle", "url": second.url}]) as again,
        ):
            elsewhere = Agent(Recorded(["All done."]).model, middlewares=[again])
            elsewhere.state = AgentState.model_validate_json(saved)
            yes = Resume(confirmations=[Confirmation(call_id=call.id, confirmed=True)])
            resumed = await collect(elsewhere.resume(yes), timeout=WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert confirmed.read_text() == "confirmed wipe\n"  # the inner tool ran exactly once
    assert results(elsewhere)[call.id].text == "The middle agent is done."
    ran = [e for e in resumed if e.type == "tool_result_end" and len(e.source_path or ()) == 2]
    assert [(e.source_path[-1].agent_name, e.state) for e in ran] == [("inner", "success")]  # type: ignore[index, union-attr]


async def test_parallel_children_across_hops_never_exceed_the_top_pool(tmp_path: Path) -> None:
    """Two workers of a supervisor run at once, each asking the inner agent (another
    process) over A2A, which tries three tool calls per request: each worker reserves its
    `per_child` share, lends the rest to the inner agent, and the totals hold."""
    effects_file = str(tmp_path / "effects")
    inner_turns = [_record(str(i)) for i in range(3)] + ["The inner agent is done."]
    inner = member(tmp_path, "inner", inner_turns, [], per_reply=True)
    async with (
        team_process(inner, {EFFECTS_ENV: effects_file}) as running,
        RemoteAgentMiddleware([{"name": "inner", "url": running.url}]) as remote,
    ):
        workers = [
            Worker(
                name,
                Recorded(calls([("inner", {"message": f"work for {name}"})], answer="ok")).model,
                "Asks the inner agent.",
                middlewares=[remote],
            )
            for name in ("left", "right")
        ]
        boss = Recorded(
            calls(
                [("ask_left", {"task": "go"}), ("ask_right", {"task": "go"})],
                [("ask_left", {"task": "once more"})],
                answer="done",
            )
        )
        top = supervisor(
            boss.model, workers, middlewares=[PropagatedLimitMiddleware(6, per_child=2)]
        )
        events = await collect(top.reply("start"), timeout=WAIT)

    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    runs, _ = effects(effects_file)
    # 6 in all: the two ask calls, each worker's call of inner, one inner call for each.
    assert len(runs) == 2, runs
    states = [e.state for e in _ends(events, 2)]
    assert sorted(states) == ["denied"] * 4 + ["success"] * 2
    # Everything was spent below: the boss's third call finds the pool empty.
    again = results(top)["call_3"]
    assert again.state == "denied" and DENIED in again.text
