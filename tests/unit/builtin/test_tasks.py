"""TasksMiddleware: task tools, the list shown at every step, dependency cycles refused, the
list kept per session (in the session's context, or as JSON files)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, Confirmation, Resume
from hookmesh.middleware.builtin.summarization import SummarizationMiddleware
from hookmesh.middleware.builtin.tasks import HINT_HEADER, TASKS_METADATA_KEY, TasksMiddleware
from hookmesh.models import ScriptedTurn
from hookmesh.schema import MessageKind, is_hint, text_of
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, documented_parameters, parameters, results
from tests.conftest import Attach
from tests.unit.builtin.test_tool_search import send_email

pytestmark = pytest.mark.timeout(60)


def _step(*calls: tuple[str, dict[str, Any]]) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=list(calls))


def _create(subject: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("task_create", {"subject": subject, **extra})


def _update(task_id: str, **changes: Any) -> tuple[str, dict[str, Any]]:
    return ("task_update", {"task_id": task_id, **changes})


async def _plan(kind: MessageKind, attach: Attach, rec: Recorded, text: str) -> Agent:
    """An agent with the tasks middleware, after one reply to `text`."""
    agent = Agent(rec.model, kind=kind, middlewares=[await attach(TasksMiddleware())])
    await collect(agent.reply(text))
    return agent


def _hints(agent: Agent) -> list[str]:
    return [text_of(m) for m in agent.state.context if is_hint(m)]


async def test_the_agent_plans_and_tracks_work_and_sees_the_list_each_step(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(
        [
            _step(
                _create("Write parser"), _create("Test parser", blocked_by=["1"]), _create("Docs")
            ),
            _step(_update("1", status="in_progress")),
            _step(_update("1", status="completed"), _update("2", status="in_progress")),
            _step(
                _update("3", status="deleted"), ("task_get", {"task_id": "2"}), ("task_list", {})
            ),
            "All planned.",
        ]
    )
    agent = await _plan(kind, attach, rec, "build a parser")
    got = results(agent)
    assert got["call_1"].text == "Created task 1: #1 [pending] Write parser"
    assert got["call_2"].text == "Created task 2: #2 [pending] Test parser (blocked by #1)"
    assert got["call_5"].text == "Updated task 1: #1 [completed] Write parser"
    assert got["call_7"].text == "Deleted task 3."
    assert got["call_8"].text == "#2 [in_progress] Test parser (blocked by #1)"
    assert got["call_9"].text == (
        "#1 [completed] Write parser\n#2 [in_progress] Test parser (blocked by #1)"
    )
    # before every step, the list as it stands is the model's last message
    assert not any(is_hint(m) for m in rec.prompts[0])
    shown = [text_of(p[-1]) for p in rec.prompts[1:]]
    assert shown[0] == (
        f"{HINT_HEADER}\n#1 [pending] Write parser\n"
        "#2 [pending] Test parser (blocked by #1)\n#3 [pending] Docs"
    )
    assert shown[-1] == f"{HINT_HEADER}\n{got['call_9'].text}"
    assert all(sum(is_hint(m) for m in p) == 1 for p in rec.prompts[1:])
    assert _hints(agent) == [shown[-1]] and is_hint(agent.state.context[-1])


async def test_dependency_cycles_and_blocked_starts_are_refused(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(
        [
            _step(_create("A"), _create("B", blocked_by=["1"]), _create("C", blocked_by=["2"])),
            _step(
                _update("1", add_blocked_by=["3"]),
                _update("2", add_blocked_by=["2"]),
                _update("2", status="in_progress"),
                _create("D", blocked_by=["9"]),
                _update("1", status="finished"),
            ),
            "ok",
        ]
    )
    got = results(await _plan(kind, attach, rec, "plan"))
    assert got["call_4"].state == "error"
    assert got["call_4"].text == (
        "Error: task 1 cannot be blocked by 3: that makes a dependency cycle "
        "(#1 -> #3 -> #2 -> #1, where '->' means 'is blocked by')"
    )
    assert got["call_5"].text == "Error: task 2 cannot be blocked by itself"
    assert "task 2 is blocked by unfinished tasks 1" in got["call_6"].text
    assert got["call_7"].text == "Error: there is no task '9'"
    assert got["call_8"].state == "error" and "invalid arguments" in got["call_8"].text
    assert rec.prompts[-1][-1].metadata[TASKS_METADATA_KEY]["tasks"][0]["blocked_by"] == []  # type: ignore[index]


async def test_the_list_lives_in_the_session_across_replies_and_summaries(
    kind: MessageKind, attach: Attach
) -> None:
    summarizer = Recorded(["Earlier: planning."] * 8)
    summary = await attach(SummarizationMiddleware(max_messages=4, model=summarizer.model))
    tasks = await attach(TasksMiddleware())
    first = Recorded([_step(_create("Ship it")), "Planned.", "Chat.", "More chat."])
    agent = Agent(first.model, kind=kind, middlewares=[summary, tasks])
    await collect(agent.reply("plan"))
    await collect(agent.reply("hello"))
    await collect(agent.reply("again"))
    assert summarizer.prompts, "summarisation never ran"
    saved = agent.state.model_dump_json()  # the session, as the agent service stores it
    later = Recorded([_step(("task_list", {})), "Still there."])
    restored = Agent(
        later.model,
        kind=kind,
        middlewares=[summary, tasks],
        state=AgentState.model_validate_json(saved),
    )
    events = await collect(restored.reply("what is left?"))
    listed = [e.text for e in events if e.type == "tool_result_delta" and e.call_id == "call_1"]
    assert listed == ["#1 [pending] Ship it"]  # (the summariser may have folded the result)


async def test_json_files_per_session(kind: MessageKind, attach: Attach, tmp_path: Path) -> None:
    mw = await attach(TasksMiddleware("files", root=tmp_path / "tasks"))
    rec = Recorded([_step(_create("Filed")), "ok"])
    await collect(Agent(rec.model, kind=kind, middlewares=[mw], session_id="s/1").reply("x"))
    (stored,) = await asyncio.to_thread(lambda: list((tmp_path / "tasks").rglob("tasks.json")))
    book = json.loads(await asyncio.to_thread(stored.read_text))
    assert [t["subject"] for t in book["tasks"]] == ["Filed"] and book["next_id"] == 2
    fresh = Recorded([_step(("task_list", {})), "ok"])
    agent = Agent(fresh.model, kind=kind, middlewares=[mw], session_id="s/1")
    await collect(agent.reply("list"))  # a new, empty session state: the file is the store
    assert results(agent)["call_1"].text == "#1 [pending] Filed"
    other = Agent(Recorded([_step(("task_list", {})), "ok"]).model, kind=kind, middlewares=[mw])
    await collect(other.reply("list"))
    assert results(other)["call_1"].text == "There are no tasks."


async def test_a_paused_reply_resumes_with_its_list(kind: MessageKind, attach: Attach) -> None:
    rec = Recorded(
        [
            _step(_create("Email the team"), ("send_email", {"to": "t@x.y", "body": "hi"})),
            _step(_update("1", status="completed")),
            "Done.",
        ]
    )
    mw = await attach(TasksMiddleware())
    agent = Agent(rec.model, kind=kind, tools=[send_email], middlewares=[mw])
    events = await collect(agent.reply("email"))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    await collect(
        agent.resume(Resume(confirmations=[Confirmation(call_id="call_2", confirmed=True)]))
    )
    assert results(agent)["call_3"].text == "Updated task 1: #1 [completed] Email the team"
    assert _hints(agent) == [f"{HINT_HEADER}\n#1 [completed] Email the team"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"store": "db"}, "store must be 'session' or 'files'"),
        ({"store": "files"}, "root is required with store='files'"),
        ({"root": "x"}, "root is required with store='files' and only then"),
        ({"max_tasks": 0}, "max_tasks must be an int >= 1"),
        ({"failure_mode": "x"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TasksMiddleware(**kwargs)


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("tasks.md") == parameters(TasksMiddleware)


def test_list_limits() -> None:
    from hookmesh.middleware.builtin.tasks import _book as tasks

    book = tasks.new_book()
    tasks.create(book, "one", "", [], limit=2)
    tasks.create(book, "two", "", [], limit=2)
    with pytest.raises(tasks.TaskError, match="already holds 2 tasks"):
        tasks.create(book, "three", "", [], limit=2)
    with pytest.raises(tasks.TaskError, match="subject is longer than 200"):
        tasks.update(
            book,
            "1",
            subject="x" * 201,
            description=None,
            status=None,
            add_blocked_by=[],
            remove_blocked_by=[],
        )
    with pytest.raises(tasks.TaskError, match="subject must not be empty"):
        tasks.create(tasks.new_book(), "  ", "", [], limit=2)
