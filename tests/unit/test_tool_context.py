"""Tools with a run context: what a run sees of the agent and the call, the state it keeps for
the reply, the events it streams and how it may fail, the same in process and behind a
sidecar (over CallTool), on both message kinds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView, FailureMode, Middleware
from hookmesh.remote import RemoteMiddleware, serve_middleware
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    EventSource,
    ImageBlock,
    InlineSource,
    MessageKind,
    TextBlock,
    ToolResultEndEvent,
    is_hint,
    make_hint,
    nest,
    text_of,
)
from hookmesh.tools import (
    AbortReply,
    Tool,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolPiece,
    tool,
)
from tests.agent_helpers import collect, customs
from tests.builtin_helpers import Recorded, calls, results
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

_IMAGE = ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))


class LedgerDownError(HookmeshError):
    """The ledger's store is down (a middleware's own failure)."""

    reason = "LEDGER_DOWN"


class Ledger(Middleware):
    """Contributes ``note(text)``, a context tool: it reports what it sees of the reply, keeps
    the reply's notes in its state slice, streams a custom and a nested event, and shows the
    notes in the next step's system prompt. ``note("fail")`` and ``note("down")`` fail."""

    needs_context = True

    def __init__(self, failure_mode: FailureMode = "fail_closed") -> None:
        self.failure_mode = failure_mode
        self._tools = [tool(self._note, name="note")]

    def middleware_key(self) -> str:
        return "ledger"

    def list_tools(self) -> list[Any]:
        return list(self._tools)

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        return f"{prompt} notes: {','.join(self.state(agent).get('notes', []))}"

    async def _note(self, context: ToolContext[AgentView], text: str) -> AsyncIterator[ToolPiece]:
        """Note a text.

        Args:
            text: What to note.
        """
        agent = context.agent
        if text == "down":
            raise AbortReply(LedgerDownError("the ledger is down", metadata={"store": "s1"}))
        if text == "fail":
            yield "partial "
            raise ToolError([TextBlock(text="Error: refused"), _IMAGE])
        if text == "misbehave":
            yield ToolResultEndEvent(reply_id=agent.reply_id, call_id=context.call.id)
        if text in ("anon", "stray"):
            yield CustomEvent(reply_id="" if text == "anon" else "other", name=f"ledger.{text}")
            return
        state = self.state(agent)
        state["notes"] = [*state.get("notes", []), text]
        yield CustomEvent(
            reply_id=agent.reply_id,
            name="ledger.seen",
            value={
                "reply": agent.reply_id,
                "session": agent.session_id,
                "user": agent.user_id,
                "agent": agent.name,
                "kind": agent.kind,
                "call": [context.call.id, context.call.name, context.call.arguments],
                "messages": len(agent.state.context),
                "notes": state["notes"],
            },
        )
        inner = CustomEvent(reply_id="inner-run", name="ledger.inner", value=text)
        yield nest(inner, EventSource(call_id=context.call.id, tool_name="note"), agent.reply_id)
        yield f"noted {len(state['notes'])}: {text}"


class Hinter(Middleware):
    """Contributes ``hint(text)``: appends a hint of its own to the context (which a sidecar
    may do without the conversation)."""

    def __init__(self) -> None:
        self._tools = [tool(self._hint, name="hint")]

    def list_tools(self) -> list[Any]:
        return list(self._tools)

    async def _hint(self, context: ToolContext[AgentView], text: str) -> str:
        """Add a hint.

        Args:
            text: The hint.
        """
        agent = context.agent
        hint = make_hint(agent.kind, text, self.middleware_key(), id=f"{context.call.id}-hint")
        agent.state.context.append(hint)
        return "hinted"


class Silent(Middleware):
    """Contributes ``wait()``, a tool that never answers."""

    def list_tools(self) -> list[Any]:
        return [tool(self._wait, name="wait")]

    async def _wait(self, unused_context: ToolContext[AgentView]) -> str:
        """Wait forever."""
        await asyncio.Event().wait()
        return "never"


def _agent(kind: MessageKind, rec: Recorded, mw: Middleware) -> Agent:
    return Agent(
        rec.model, name="clerk", kind=kind, middlewares=[mw], session_id="s1", user_id="u1"
    )


async def test_a_context_tool_sees_the_reply_keeps_its_state_and_streams_events(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(calls([("note", {"text": "a"})], [("note", {"text": "b"})]))
    agent = _agent(kind, rec, await attach(Ledger()))
    events = await collect(agent.reply("start"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    rid = events[0].reply_id
    seen = [e.value for e in customs(events) if e.name == "ledger.seen"]
    assert seen == [
        {
            "reply": rid,
            "session": "s1",
            "user": "u1",
            "agent": "clerk",
            "kind": kind,
            "call": ["call_1", "note", '{"text": "a"}'],
            "messages": 2,
            "notes": ["a"],
        },
        {
            "reply": rid,
            "session": "s1",
            "user": "u1",
            "agent": "clerk",
            "kind": kind,
            "call": ["call_2", "note", '{"text": "b"}'],
            "messages": 4,
            "notes": ["a", "b"],
        },
    ]
    inner = [e for e in events if e.source_path]
    assert [(e.reply_id, e.source_path[0].call_id, e.value) for e in inner] == [  # type: ignore[index, union-attr]
        (rid, "call_1", "a"),
        (rid, "call_2", "b"),
    ]
    # each event lands inside its call, before the call's result ends
    ends = [i for i, e in enumerate(events) if e.type == "tool_result_end"]
    assert next(i for i, e in enumerate(events) if e in inner) < ends[0]
    got = results(agent)
    assert (got["call_1"].text, got["call_2"].text) == ("noted 1: a", "noted 2: b")
    # the state reached the agent: the next steps' prompts show it
    assert [text_of(p[0]).rpartition("notes: ")[2] for p in rec.prompts] == ["", "a", "a,b"]
    # a new reply starts with no notes
    rec2 = Recorded(calls([("note", {"text": "c"})]))
    agent.model = rec2.model
    events = await collect(agent.reply("again"))
    assert [e.value["notes"] for e in customs(events) if e.name == "ledger.seen"] == [["c"]]


def _normalised(events: list[AgentEvent], reply_id: str) -> list[str]:
    """The events as sorted JSON, the reply's id (random) masked."""
    dumped = (json.dumps(e.model_dump(mode="json"), sort_keys=True) for e in events)
    return [d.replace(reply_id, "<reply>") for d in dumped]


async def test_its_events_and_results_are_identical_in_process_and_behind_a_sidecar(
    kind: MessageKind,
) -> None:
    script = [[("note", {"text": "a"}), ("note", {"text": "fail"})], [("note", {"text": "b"})]]
    running = await serve_middleware(Ledger())
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=10.0)
    try:
        runs = []
        for mw in (Ledger(), remote):
            agent = _agent(kind, Recorded(calls(*script)), mw)
            events = await collect(agent.reply("start"))
            outputs = [
                (r.call_id, r.state, [b.model_dump() for b in r.output])
                for r in results(agent).values()
            ]
            runs.append((_normalised(events, events[0].reply_id), outputs))
    finally:
        await remote.aclose()
        await running.stop(None)
    (local_events, local_outputs), (remote_events, remote_outputs) = runs
    assert remote_events == local_events
    assert remote_outputs == local_outputs
    assert len(local_outputs) == 3


async def test_a_tool_error_is_the_result_it_names(kind: MessageKind, attach: Attach) -> None:
    agent = _agent(kind, Recorded(calls([("note", {"text": "fail"})])), await attach(Ledger()))
    await collect(agent.reply("start"))
    result = results(agent)["call_1"]
    assert result.state == "error"
    assert result.output == [TextBlock(text="partial Error: refused"), _IMAGE]


async def test_a_tool_may_not_end_or_answer_the_reply_itself(
    kind: MessageKind, attach: Attach
) -> None:
    agent = _agent(kind, Recorded(calls([("note", {"text": "misbehave"})])), await attach(Ledger()))
    events = await collect(agent.reply("start"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = results(agent)["call_1"]
    assert result.state == "error"
    assert "yielded a tool_result_end event" in result.text
    own_ends = [e for e in events if e.type == "tool_result_end" and not e.source_path]
    assert len(own_ends) == 1


async def test_an_event_gets_the_replys_id_and_another_replys_is_refused(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(calls([("note", {"text": "anon"}), ("note", {"text": "stray"})]))
    agent = _agent(kind, rec, await attach(Ledger()))
    events = await collect(agent.reply("start"))
    assert [(e.name, e.reply_id) for e in customs(events)] == [("ledger.anon", events[0].reply_id)]
    got = results(agent)
    assert got["call_1"].state == "success"
    assert got["call_2"].state == "error" and "another reply" in got["call_2"].text


async def test_abort_reply_ends_the_reply_with_the_middlewares_error(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(calls([("note", {"text": "down"})]))
    agent = _agent(kind, rec, await attach(Ledger()))
    events = await collect(agent.reply("start"))
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error.reason == "LEDGER_DOWN"  # type: ignore[union-attr]
    assert end.error.source == "middleware:ledger"  # type: ignore[union-attr]
    assert end.error.metadata["store"] == "s1"  # type: ignore[union-attr]
    assert "the ledger is down" in end.error.message  # type: ignore[union-attr]
    assert len(rec.prompts) == 1  # the reply went no further


async def test_under_fail_open_an_aborting_tool_is_an_error_result(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(calls([("note", {"text": "down"})]))
    agent = _agent(kind, rec, await attach(Ledger(failure_mode="fail_open")))
    events = await collect(agent.reply("start"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = results(agent)["call_1"]
    assert (result.state, result.text) == ("error", "Error: the ledger is down")
    assert len(rec.prompts) == 2  # the reply went on


async def test_a_tool_may_add_its_own_hint_without_the_conversation(
    kind: MessageKind, attach: Attach
) -> None:
    agent = _agent(
        kind, Recorded(calls([("hint", {"text": "mind the gap"})])), await attach(Hinter())
    )
    await collect(agent.reply("start"))
    assert results(agent)["call_1"].text == "hinted"
    assert [text_of(m) for m in agent.state.context if is_hint(m)] == ["mind the gap"]


async def test_a_silent_sidecar_tool_hits_the_message_deadline(kind: MessageKind) -> None:
    running = await serve_middleware(Silent())
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=0.5)
    try:
        agent = _agent(kind, Recorded(calls([("wait", {})])), remote)
        events = await collect(agent.reply("start"))
    finally:
        await remote.aclose()
        await running.stop(None)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = results(agent)["call_1"]
    assert result.state == "error"
    assert "SidecarError: tool wait: the sidecar sent nothing for 0.5 s" in result.text


# --- declaring a context ------------------------------------------------------------------------


def test_the_context_parameter_is_found_once_and_left_out_of_the_schema() -> None:
    @tool
    def stamp(context: ToolContext[AgentView], label: str) -> str:
        """Stamp a label.

        Args:
            label: The label.
        """
        return f"{label}@{context.agent.reply_id}"

    assert stamp.takes_context
    assert list(stamp.parameters["properties"]) == ["label"]
    assert stamp.parse_arguments('{"label": "x"}') == {"label": "x"}
    with pytest.raises(ToolArgumentError, match="context"):
        stamp.parse_arguments('{"label": "x", "context": {}}')
    plain = Tool("plain", "", {}, func=lambda **unused: "ok")
    direct = Tool("direct", "", {}, func=stamp.func)
    assert (plain.takes_context, direct.takes_context) == (False, True)


async def test_a_context_tool_refuses_to_run_without_one() -> None:
    with pytest.raises(RuntimeError, match="runs with a ToolContext"):
        [piece async for piece in Ledger().list_tools()[0].run({"text": "a"})]


def test_a_context_must_be_one_parameter_and_resolve() -> None:
    def two(a: ToolContext[AgentView], b: ToolContext[AgentView]) -> str:
        return ""

    with pytest.raises(TypeError, match="one parameter may take the ToolContext"):
        tool(two)

    def unresolved(context: ToolContext[NotImported]) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="does not resolve at run time"):
        Tool("unresolved", "", {}, func=unresolved)
