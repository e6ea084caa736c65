"""Plan and tasks: task tools, the task list shown to the model at every step, kept per session."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Literal

from hookmesh.agent import new_id
from hookmesh.middleware import (
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
from hookmesh.schema import AgentEvent, Message, is_hint, make_hint
from hookmesh.tools import Tool, ToolContext, ToolError, tool

TASKS_METADATA_KEY = "hookmesh.tasks"
"""Metadata key of the task-list hint message: the list itself, as JSON."""
HINT_HEADER = "Your task list (keep it current with task_update as you work):"
"""The first line of the task-list hint."""
_PERSISTED = frozenset({"completed", "exceed_max_iters"})


class TasksMiddleware(Middleware):
    """A task list the agent plans and tracks its work with, kept per session.

    Tools (their runs reach the reply's list through the run context): ``task_create``,
    ``task_get``, ``task_update`` and ``task_list``. A task has an id, a subject, a
    description, a status (``pending``, ``in_progress``, ``completed``; ``deleted`` removes
    it) and the ids of the tasks that block it. ``task_update`` refuses, with an error
    result naming the chain, a blocked-by link that would make a cycle, and starting or
    completing a task whose blockers are not completed.

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
    wins); the task tools through ``CallTool`` without a reply (an older agent: there is no
    list to change). A reply that fails or is interrupted keeps, in session
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
        self._tools = [
            tool(self._task_create, name="task_create"),
            tool(self._task_get, name="task_get", read_only=True),
            tool(self._task_update, name="task_update"),
            tool(self._task_list, name="task_list", read_only=True),
        ]

    def middleware_key(self) -> str:
        return "tasks"

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

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

    # --- the tools ---------------------------------------------------------------------------

    async def _task_create(
        self,
        context: ToolContext[AgentView],
        subject: str,
        description: str = "",
        blocked_by: list[str] = [],  # noqa: B006
    ) -> str:
        """Add a task to your task list (it starts pending). Plan multi-step work with it.

        Args:
            subject: A short imperative title, e.g. "Write the parser tests".
            description: What done means, and anything needed to do it.
            blocked_by: Ids of tasks that must be completed first.
        """

        def create(book: Book) -> str:
            task_id = tasks.create(book, subject, description, blocked_by, self.max_tasks)
            return f"Created task {task_id}: {tasks.detail(book, task_id)}"

        return await self._change(context.agent, create)

    async def _task_get(self, context: ToolContext[AgentView], task_id: str) -> str:
        """Show one task with its description.

        Args:
            task_id: The task's id.
        """
        return await self._change(context.agent, lambda book: tasks.detail(book, task_id))

    async def _task_update(
        self,
        context: ToolContext[AgentView],
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
        return await self._change(
            context.agent,
            lambda book: tasks.update(
                book,
                task_id,
                subject=subject,
                description=description,
                status=status,
                add_blocked_by=add_blocked_by,
                remove_blocked_by=remove_blocked_by,
            ),
        )

    async def _task_list(self, context: ToolContext[AgentView]) -> str:
        """Show every task with its status and what blocks it."""
        return await self._change(context.agent, tasks.listing)

    async def _change(self, agent: AgentView, run: Callable[[Book], str]) -> str:
        """Run one task tool on a copy of this reply's list; keep (and save) the copy when it
        changed. A refused change is an error result, and the list stays as it was."""
        state = self.state(agent)
        if "book" not in state:  # a bare CallTool: no reply loaded a list
            raise ToolError("Error: the task tools run only within a reply, which has the list")
        book = json.loads(json.dumps(state["book"]))
        try:
            text = run(book)
        except TaskError as exc:
            raise ToolError(f"Error: {exc}") from None
        if book != state["book"]:
            state["book"] = book
            await self._save(agent, book)
        return text


def _shown(context: list[Message]) -> Message | None:
    """The task-list hint in the context, if any."""
    for msg in reversed(context):
        if is_hint(msg) and TASKS_METADATA_KEY in (msg.metadata or {}):
            return msg
    return None


__all__ = ["HINT_HEADER", "TASKS_METADATA_KEY", "TasksMiddleware"]
