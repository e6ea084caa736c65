"""Human review: per-tool allow/ask/deny, and the approve / edit / reject answers on resume."""

from __future__ import annotations

import json

import pytest

from hookmesh.agent import Agent, AgentState, Confirmation, Resume, tool
from hookmesh.errors import SchemaError
from hookmesh.middleware.builtin.call_limits import CallLimitMiddleware
from hookmesh.middleware.builtin.human_review import REVIEW_EVENT, HumanReviewMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    EDITED_CALLS_METADATA_KEY,
    MessageKind,
    is_assistant,
    tool_calls,
    tool_results,
)
from tests.agent_helpers import collect, customs, echo, types
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


@tool(needs_confirmation=True)
def delete_file(path: str, force: bool = False) -> str:
    """Delete a file.

    Args:
        path: Which file.
        force: Even if read-only.
    """
    return f"deleted {path}{' (forced)' if force else ''}"


@tool
def wipe_disk() -> str:
    """Erase everything."""
    return "wiped"


POLICIES = {
    "delete_file": {"decision": "ask", "description": "deletes user data"},
    "wipe_disk": {"decision": "deny", "description": "never on this machine"},
}


def _results(agent: Agent) -> dict[str, tuple[str, str]]:
    return {r.name: (r.state, r.text) for m in agent.state.context for r in tool_results(m)}


async def _paused(kind: MessageKind, attach: Attach, answer: str = "done") -> tuple[Agent, str]:
    review = await attach(HumanReviewMiddleware(POLICIES, default="allow"))
    turns = [
        ScriptedTurn(
            tool_calls=[
                ("wipe_disk", {}),
                ("echo", {"text": "hi"}),
                ("delete_file", {"path": "/tmp/a"}),
            ]
        ),
        answer,
    ]
    agent = Agent(
        ScriptedChatModel(turns),
        kind=kind,
        tools=[delete_file, wipe_disk, echo],
        middlewares=[review],
    )
    events = await collect(agent.reply("tidy up"))
    assert types(events)[-3:] == ["custom", "require_user_confirm", "reply_end"]
    assert [c.value for c in customs(events) if c.name == REVIEW_EVENT] == [
        {
            "call_id": events[-2].tool_calls[0].id,  # type: ignore[union-attr]
            "tool": "delete_file",
            "description": "deletes user data",
        }
    ]
    # deny answers with the description; default allow runs echo; ask waits.
    assert _results(agent) == {
        "wipe_disk": ("denied", "Permission denied: never on this machine"),
        "echo": ("success", "hi"),
    }
    return agent, events[-2].tool_calls[0].id  # type: ignore[union-attr]


async def test_edit_runs_the_edited_call_and_the_context_records_it(
    kind: MessageKind, attach: Attach
) -> None:
    agent, call_id = await _paused(kind, attach)
    edited = json.dumps({"path": "/tmp/b", "force": True})
    # Survives a restart: the paused state is JSON.
    agent = Agent(
        ScriptedChatModel(["done"]),
        kind=kind,
        tools=[delete_file, wipe_disk, echo],
        middlewares=agent.middlewares,
        state=AgentState.model_validate_json(agent.state.model_dump_json()),
    )
    events = await collect(
        agent.resume(
            Resume(confirmations=[Confirmation(call_id=call_id, confirmed=True, arguments=edited)])
        )
    )
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _results(agent)["delete_file"] == ("success", "deleted /tmp/b (forced)")
    asking = next(m for m in agent.state.context if any(c.id == call_id for c in tool_calls(m)))
    assert is_assistant(asking)
    assert next(c for c in tool_calls(asking) if c.id == call_id).arguments == edited
    original = (asking.metadata or {})[EDITED_CALLS_METADATA_KEY][call_id]
    assert json.loads(original) == {"path": "/tmp/a"}


async def test_reject_with_a_message_tells_the_model(kind: MessageKind, attach: Attach) -> None:
    agent, call_id = await _paused(kind, attach)
    answer = Confirmation(call_id=call_id, confirmed=False, reason="archive it instead")
    events = await collect(agent.resume(Resume(confirmations=[answer])))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _results(agent)["delete_file"] == (
        "denied",
        "The user denied this call: archive it instead",
    )


async def test_approve_runs_the_models_arguments(kind: MessageKind, attach: Attach) -> None:
    agent, call_id = await _paused(kind, attach)
    await collect(
        agent.resume(Resume(confirmations=[Confirmation(call_id=call_id, confirmed=True)]))
    )
    assert _results(agent)["delete_file"] == ("success", "deleted /tmp/a")
    assert all(EDITED_CALLS_METADATA_KEY not in (m.metadata or {}) for m in agent.state.context)


@pytest.mark.parametrize(
    ("confirmed", "arguments", "problem"),
    [
        (True, '{"path": 3}', "invalid arguments for delete_file: path"),
        (True, '{"path": "/x", "mode": 1}', "mode: Extra inputs are not permitted"),
        (True, "[1]", "must be a JSON object"),
        (False, '{"path": "/x"}', "only an approved call can be edited"),
    ],
)
async def test_a_bad_edit_is_refused_and_the_reply_stays_paused(
    kind: MessageKind, confirmed: bool, arguments: str, problem: str
) -> None:
    agent, call_id = await _paused(kind, _local)
    bad = Confirmation(call_id=call_id, confirmed=confirmed, arguments=arguments)
    with pytest.raises(SchemaError) as refused:
        agent.resume(Resume(confirmations=[bad]))
    violation = refused.value.violations[0]
    assert violation.field == "confirmations[0].arguments"
    assert problem in violation.description
    assert agent.state.pending is not None
    good = Confirmation(call_id=call_id, confirmed=True, arguments='{"path": "/tmp/c"}')
    await collect(agent.resume(Resume(confirmations=[good])))
    assert _results(agent)["delete_file"] == ("success", "deleted /tmp/c")


async def _local(mw: HumanReviewMiddleware) -> HumanReviewMiddleware:  # type: ignore[misc]
    return mw


async def test_the_description_comes_before_the_pause_when_nothing_runs(
    kind: MessageKind, attach: Attach
) -> None:
    review = await attach(HumanReviewMiddleware(POLICIES))
    turns = [ScriptedTurn(tool_calls=[("delete_file", {"path": "/a"})])]
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[delete_file], middlewares=[review])
    events = await collect(agent.reply("go"))
    assert types(events)[-3:] == ["custom", "require_user_confirm", "reply_end"]
    assert customs(events)[0].value["description"] == "deletes user data"


async def test_unnamed_tools_defer_to_the_inner_checks(kind: MessageKind, attach: Attach) -> None:
    review = await attach(HumanReviewMiddleware({"wipe_disk": "deny"}))
    turns = [ScriptedTurn(tool_calls=[("delete_file", {"path": "/a"}), ("echo", {"text": "x"})])]
    agent = Agent(
        ScriptedChatModel(turns), kind=kind, tools=[delete_file, echo], middlewares=[review]
    )
    events = await collect(agent.reply("go"))
    # delete_file is marked needs_confirmation: the core asks; no review event.
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    assert not [c for c in customs(events) if c.name == REVIEW_EVENT]
    assert _results(agent) == {"echo": ("success", "x")}


async def test_allow_keeps_an_inner_deny_and_overrides_only_an_ask(
    kind: MessageKind, attach: Attach
) -> None:
    # default="allow" and a named allow both still ask the inner checks: the call limit
    # placed after the review denies the second and third echo; the core's ask for
    # delete_file (needs_confirmation) is overridden.
    review = await attach(HumanReviewMiddleware({"delete_file": "allow"}, default="allow"))
    limit = CallLimitMiddleware(tool_calls_per_reply={"echo": 1, "delete_file": 1})
    turns = [
        ScriptedTurn(
            tool_calls=[
                ("echo", {"text": "a"}),
                ("echo", {"text": "b"}),
                ("echo", {"text": "c"}),
                ("delete_file", {"path": "/a"}),
                ("delete_file", {"path": "/b"}),
            ]
        ),
        "done",
    ]
    agent = Agent(
        ScriptedChatModel(turns),
        kind=kind,
        tools=[delete_file, echo],
        middlewares=[review, limit],
    )
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert not [c for c in customs(events) if c.name == REVIEW_EVENT]
    states = [(r.name, r.state) for m in agent.state.context for r in tool_results(m)]
    assert states == [
        ("echo", "success"),
        ("echo", "denied"),
        ("echo", "denied"),
        ("delete_file", "success"),
        ("delete_file", "denied"),
    ]
    denied = [r.text for m in agent.state.context for r in tool_results(m) if r.state == "denied"]
    assert all("the limit of 1 calls per reply" in text for text in denied)


def test_policies_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="decision must be allow, ask or deny"):
        HumanReviewMiddleware({"x": "maybe"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="policy for 'x'"):
        HumanReviewMiddleware({"x": 3})  # type: ignore[dict-item]
