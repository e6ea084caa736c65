"""Plan and tasks: task tools, the task list shown to the model at every step, kept per session."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hookmesh.agent import new_id
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    ReasoningArgs,
    ReasoningNext,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._atomic import write_text_atomically
from hookmesh.middleware.builtin._support._confine import safe_name
from hookmesh.middleware.builtin.tasks import _book as tasks
from hookmesh.middleware.builtin.tasks._book import Book, TaskError, TaskStatus
from hookmesh.schema import (
    AgentEvent,
    Message,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    is_hint,
    make_hint,
)
from hookmesh.tools import Tool, ToolArgumentError, tool

if TYPE_CHECKING:
    pass

TASKS_METADATA_KEY = "hookmesh.tasks"
"""Metadata key of the task-list hint message: the list itself, as JSON."""
HINT_HEADER = "Your task list (keep it current with task_update as you work):"
"""The first line of the task-list hint."""
_PERSISTED = frozenset({"completed", "exceed_max_iters"})


def _unbound(name: str) -> RuntimeError:
    return RuntimeError(f"{name} runs through TasksMiddleware.on_acting, which knows the session")


@tool
async def task_create(subject: str, description: str = "", blocked_by: list[str] = []) -> str:  # noqa: B006
    """Add a task to your task list (it starts pending). Plan multi-step work with it.

    Args:
        subject: A short imperative title, e.g. "Write the parser tests".
        description: What done means, and anything needed to do it.
        blocked_by: Ids of tasks that must be completed first.
    """
    raise _unbound("task_create")


@tool(read_only=True)
async def task_get(task_id: str) -> str:
    """Show one task with its description.

    Args:
        task_id: The task's id.
    """
    raise _unbound("task_get")


@tool
async def task_update(
    task_id: str,
    status: TaskStatus | None = None,
    subject: str | None = None,
    description: str | None = None,
    add_blocked_by: list[str] = [],  # noqa: B006
    remove_blocked_by: list[str] = [],  # noqa: B006
) -> str:
    """Change a task: mark it in_progress when you start it and completed when done, or
    deleted when it is no longer needed; edit it, or change what blocks it.

    Args:
        task_id: The task's id.
        status: pending, in_progress, completed or deleted.
        subject: A new title.
        description: A new description.
        add_blocked_by: Ids of tasks that must be completed before this one.
        remove_blocked_by: Ids that no longer block this one.
    """
    raise _unbound("task_update")


@tool(read_only=True)
async def task_list() -> str:
    """Show every task with its status and what blocks it."""
    raise _unbound("task_list")


_BY_NAME: dict[str, Tool] = {t.name: t for t in (task_create, task_get, task_update, task_list)}


class TasksMiddleware(Middleware):
    """A task list the agent plans and tracks its work with, kept per session.

    Tools (run in `on_acting`): ``task_create``, ``task_get``, ``task_update`` and
    ``task_list``. A task has an id, a subject, a description, a status (``pending``,
    ``in_progress``, ``completed``; ``deleted`` removes it) and the ids of the tasks that
    block it. ``task_update`` refuses, with an error result naming the chain, a blocked-by
    link that would make a cycle, and starting or completing a task whose blockers are not
    completed.

    The list is shown to the model before every reasoning step as one hint message at the
    end of the context (`on_reasoning`), which replaces the previous one and, unlike other
    hints, stays in the session: with ``store="session"`` (the default) that message's
    metadata (``TASKS_METADATA_KEY``) is where the list lives between replies, so it needs
    no other storage and survives summarisation (it is read at reply start and written
    back at every step and at a completed reply's end). With a `root`, the list lives in
    ``<root>/<session id>/tasks.json`` instead, written after every change. During a
    reply it is in ``middle_context["tasks"][reply_id]`` (``{"book": ...}``), so a paused
    reply resumes with it.

    Not supported: one list shared by concurrent replies of one session (the last writer
    wins); the task tools through ``CallTool`` alone (they need the session: they run in
    `on_acting`, also in a sidecar). A reply that fails or is interrupted keeps, in session
    storage, the list as of its last step. Remote: declares `needs_context`.

    Example:
        >>> sorted(t.name for t in TasksMiddleware().list_tools())
        ['task_create', 'task_get', 'task_list', 'task_update']

    Args:
        store: ``session`` (in the session's context) or ``files`` (JSON under `root`).
        root: The folder of the JSON files (``store="files"``).
        max_tasks: Most tasks in a list.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reply": ("reply_end",),
        "on_reasoning": (),
        "on_acting": (),
    }

    def __init__(
        self,
        store: Literal["session", "files"] = "session",
        *,
        root: str | os.PathLike[str] | None = None,
        max_tasks: int = 100,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        if store not in ("session", "files"):
            raise ValueError(f"store must be 'session' or 'files', not {store!r}")
        if (store == "files") != (root is not None):
            raise ValueError("root is required with store='files' and only then")
        self.store = store
        self.root = Path(root).resolve() if root is not None else None
        self.max_tasks = check.whole("max_tasks", max_tasks)
        self.failure_mode = check.failure(failure_mode)

    def middleware_key(self) -> str:
        return "tasks"

    def list_tools(self) -> list[Tool]:
        return list(_BY_NAME.values())

    # --- storage ---------------------------------------------------------------------------

    def _file(self, agent: AgentView) -> Path:
        assert self.root is not None
        return self.root / safe_name(agent.session_id or "no-session") / "tasks.json"

    async def _load(self, agent: AgentView) -> Book:
        if self.root is None:
            shown = _shown(agent.state.context)
            found = (shown.metadata or {}).get(TASKS_METADATA_KEY) if shown else None
            return found if isinstance(found, dict) else tasks.new_book()
        path = self._file(agent)
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        except FileNotFoundError:
            return tasks.new_book()
        return json.loads(text)  # type: ignore[no-any-return]

    async def _save(self, agent: AgentView, book: Book) -> None:
        if self.root is not None:
            text = json.dumps(book, ensure_ascii=False, indent=1)
            await asyncio.to_thread(write_text_atomically, self._file(agent), text)

    def _show(self, agent: AgentView, book: Book) -> None:
        """Replace the task-list hint at the end of the context (none for an empty list)."""
        context = agent.state.context
        old = _shown(context)
        if old is not None:
            context[:] = [m for m in context if m is not old]
        if not book["tasks"]:
            return
        text = f"{HINT_HEADER}\n{tasks.listing(book)}"
        hint = make_hint(agent.kind, text, self.middleware_key(), id=new_id())
        hint.metadata = {**(hint.metadata or {}), TASKS_METADATA_KEY: book}
        context.append(hint)

    # --- hooks -----------------------------------------------------------------------------

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Load the list at reply start; write it back once a finished reply's events are
        out (then the context is final, also as a sidecar sees it)."""
        state = self.state(agent)
        if kwargs.get("resume") is None or "book" not in state:
            state["book"] = await self._load(agent)
        finish = ""
        async for event in next_handler():
            if event.type == "reply_end" and not event.source_path:
                finish = event.finish_reason
            yield event
        if finish in _PERSISTED:
            self._show(agent, self.state(agent)["book"])

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Show the current list to the model as the last message before this step."""
        self._show(agent, self.state(agent)["book"])
        async for event in next_handler():
            yield event

    async def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Run the task tools on this reply's list; pass every other call through."""
        call = kwargs["tool_call"]
        if call.name not in _BY_NAME:
            async for event in next_handler():
                yield event
            return
        reply_id = agent.reply_id
        yield ToolResultStartEvent(reply_id=reply_id, call_id=call.id, name=call.name)
        state = self.state(agent)
        try:
            arguments = kwargs.get("arguments")
            if arguments is None:  # in a sidecar only the call travels
                arguments = _BY_NAME[call.name].parse_arguments(call.arguments)
            book = json.loads(json.dumps(state["book"]))
            text = self._run(book, call.name, arguments)
        except (TaskError, ToolArgumentError) as exc:
            yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=f"Error: {exc}")
            yield ToolResultEndEvent(reply_id=reply_id, call_id=call.id, state="error")
            return
        if book != state["book"]:
            state["book"] = book
            await self._save(agent, book)
        yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=text)
        yield ToolResultEndEvent(reply_id=reply_id, call_id=call.id)

    def _run(self, book: Book, name: str, args: dict[str, Any]) -> str:
        if name == "task_create":
            task_id = tasks.create(
                book, args["subject"], args["description"], args["blocked_by"], self.max_tasks
            )
            return f"Created task {task_id}: {tasks.detail(book, task_id)}"
        if name == "task_get":
            return tasks.detail(book, args["task_id"])
        if name == "task_update":
            return tasks.update(
                book,
                args["task_id"],
                subject=args["subject"],
                description=args["description"],
                status=args["status"],
                add_blocked_by=args["add_blocked_by"],
                remove_blocked_by=args["remove_blocked_by"],
            )
        return tasks.listing(book)


def _shown(context: list[Message]) -> Message | None:
    """The task-list hint in the context, if any."""
    for msg in reversed(context):
        if is_hint(msg) and TASKS_METADATA_KEY in (msg.metadata or {}):
            return msg
    return None


__all__ = ["HINT_HEADER", "TASKS_METADATA_KEY", "TasksMiddleware"]
