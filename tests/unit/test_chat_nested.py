"""`hookmesh chat` acts only on the reply's own pause and end: a sub-agent's
require_user_confirm, forwarded as a nested event, is shown but never answered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookmesh.cli._chat import _turn
from hookmesh.cli._printer import EventPrinter
from hookmesh.schema import (
    AgentEvent,
    EventSource,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireUserConfirmEvent,
    ToolCall,
)


class _Replies:
    """A client whose reply streams fixed events and which records any resume."""

    def __init__(self, events: list[AgentEvent]) -> None:
        self.events = events
        self.resumed = 0

    async def reply(self, text: str, **options: Any) -> AsyncIterator[AgentEvent]:
        for event in self.events:
            yield event

    async def resume(self, session_id: str, **options: Any) -> AsyncIterator[AgentEvent]:
        self.resumed += 1
        return
        yield


def _events(nested: bool) -> list[AgentEvent]:
    path = [EventSource(call_id="c1", tool_name="ask_chef", agent_name="chef")] if nested else None
    ask = RequireUserConfirmEvent(
        reply_id="r1",
        source_path=path,
        tool_calls=[ToolCall(id="t1", name="delete_file", arguments='{"path": "/tmp/x"}')],
    )
    end = ReplyEndEvent(reply_id="r1", session_id="s1", finish_reason="completed")
    if not nested:
        end = ReplyEndEvent(reply_id="r1", session_id="s1", finish_reason="awaiting_confirmation")
    return [ReplyStartEvent(reply_id="r1", session_id="s1"), ask, end]


@pytest.mark.parametrize("nested", [True, False])
async def test_only_the_replys_own_pause_is_answered(
    nested: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", _Lines("a\n"))
    client = _Replies(_events(nested))
    state = {"session": "s1"}
    status = await _turn(client, EventPrinter(as_json=True), "go", state, {}, None, None)  # type: ignore[arg-type]
    assert status == 0
    asked = "delete_file" in capsys.readouterr().err
    assert (asked, client.resumed) == ((False, 0) if nested else (True, 1))


class _Lines:
    """stdin holding fixed lines."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""


def test_who_asks_is_read_only_from_a_call_standing_for_a_nested_ask() -> None:
    from hookmesh.schema import asked_by

    path = '{"path": ["ops", "janitor"], "asks": []}'
    assert asked_by(ToolCall(id="a", name="confirm_ops", arguments=path)) == ["ops", "janitor"]
    assert asked_by(ToolCall(id="b", name="billing__confirm", arguments=path)) == [
        "ops",
        "janitor",
    ]
    assert asked_by(ToolCall(id="c", name="copy_files", arguments=path)) == []  # its own call
    assert asked_by(ToolCall(id="d", name="confirm_ops", arguments="not json")) == []


def test_who_asks_is_read_from_a_sub_agents_external_call_passed_up() -> None:
    """An ``external_<name>`` call stands for a sub-agent's external call when its arguments
    name the path, the tool and its arguments; a client's own ``external_…`` tool does not."""
    from hookmesh.schema import asked_by

    spec = {"worker": "desk", "path": ["desk", "scout"], "tool": "locate", "arguments": "{}"}
    passed_up = ToolCall(id="a", name="external_desk", arguments=json.dumps(spec))
    assert asked_by(passed_up) == ["desk", "scout"]
    for name in ("external_step", "external_skill"):
        assert asked_by(ToolCall(id="b", name=name, arguments=json.dumps(spec))) == spec["path"]
    own = {"path": ["a", "b"]}  # a client's tool external_lookup taking a path
    assert asked_by(ToolCall(id="c", name="external_lookup", arguments=json.dumps(own))) == []
    bad = {**spec, "arguments": {"precision": "city"}}  # not JSON text: not a passed-up call
    assert asked_by(ToolCall(id="d", name="external_desk", arguments=json.dumps(bad))) == []
    assert asked_by(ToolCall(id="e", name="locate", arguments=json.dumps(spec))) == []
