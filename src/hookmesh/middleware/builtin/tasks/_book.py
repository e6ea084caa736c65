"""A task list as plain JSON (so it lives in agent state, a message's metadata or a file): the
rules for creating, updating and listing tasks, dependency cycles refused."""

from __future__ import annotations

from typing import Any, Literal

TaskStatus = Literal["pending", "in_progress", "completed", "deleted"]
"""Where a task stands; a deleted task leaves the list."""
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "deleted")
MAX_SUBJECT = 200
MAX_DESCRIPTION = 4000

Book = dict[str, Any]
"""``{"next_id": int, "tasks": [{"id", "subject", "description", "status", "blocked_by"}]}``."""


class TaskError(ValueError):
    """The request breaks a rule; the message is shown to the model."""


def new_book() -> Book:
    """An empty task list."""
    return {"next_id": 1, "tasks": []}


def _find(book: Book, task_id: str) -> dict[str, Any]:
    for task in book["tasks"]:
        if task["id"] == task_id:
            return task  # type: ignore[no-any-return]
    raise TaskError(f"there is no task {task_id!r}")


def _text(name: str, value: str, limit: int) -> str:
    value = value.strip()
    if len(value) > limit:
        raise TaskError(f"{name} is longer than {limit} characters")
    return value


def _blockers(book: Book, task_id: str | None, ids: list[str]) -> list[str]:
    for blocker in ids:
        _find(book, blocker)
        if blocker == task_id:
            raise TaskError(f"task {task_id} cannot be blocked by itself")
    return list(dict.fromkeys(ids))


def _reaches(book: Book, start: str, goal: str) -> list[str] | None:
    """A blocked-by path from `start` to `goal`, if there is one."""
    by_id = {t["id"]: t for t in book["tasks"]}
    stack: list[list[str]] = [[start]]
    seen = {start}
    while stack:
        path = stack.pop()
        if path[-1] == goal:
            return path
        for nxt in by_id[path[-1]]["blocked_by"]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append([*path, nxt])
    return None


def create(book: Book, subject: str, description: str, blocked_by: list[str], limit: int) -> str:
    """Add a pending task; its id."""
    if len(book["tasks"]) >= limit:
        raise TaskError(f"the list already holds {limit} tasks: complete or delete some first")
    subject = _text("subject", subject, MAX_SUBJECT)
    if not subject:
        raise TaskError("subject must not be empty")
    task_id = str(book["next_id"])
    book["tasks"].append(
        {
            "id": task_id,
            "subject": subject,
            "description": _text("description", description, MAX_DESCRIPTION),
            "status": "pending",
            "blocked_by": _blockers(book, None, blocked_by),
        }
    )
    book["next_id"] += 1
    return task_id


def update(
    book: Book,
    task_id: str,
    *,
    subject: str | None,
    description: str | None,
    status: str | None,
    add_blocked_by: list[str],
    remove_blocked_by: list[str],
) -> str:
    """Change a task; what changed, in words. Refuses a blocked-by cycle and starting or
    completing a task whose blockers are not completed."""
    task = _find(book, task_id)
    blockers = [b for b in task["blocked_by"] if b not in remove_blocked_by]
    for blocker in _blockers(book, task_id, add_blocked_by):
        path = _reaches(book, blocker, task_id)
        if path is not None:
            chain = " -> ".join(f"#{i}" for i in [task_id, *path])
            raise TaskError(
                f"task {task_id} cannot be blocked by {blocker}: that makes a dependency cycle "
                f"({chain}, where '->' means 'is blocked by')"
            )
        if blocker not in blockers:
            blockers.append(blocker)
    if status is not None and status not in STATUSES:
        raise TaskError(f"status must be one of {', '.join(STATUSES)}")
    if status in ("in_progress", "completed"):
        open_ = [b for b in blockers if _find(book, b)["status"] != "completed"]
        if open_:
            raise TaskError(
                f"task {task_id} is blocked by unfinished tasks {', '.join(open_)}: "
                "complete them first, or remove them from blocked_by"
            )
    if status == "deleted":
        book["tasks"] = [t for t in book["tasks"] if t["id"] != task_id]
        for other in book["tasks"]:
            other["blocked_by"] = [b for b in other["blocked_by"] if b != task_id]
        return f"Deleted task {task_id}."
    if subject is not None:
        task["subject"] = _text("subject", subject, MAX_SUBJECT) or task["subject"]
    if description is not None:
        task["description"] = _text("description", description, MAX_DESCRIPTION)
    if status is not None:
        task["status"] = status
    task["blocked_by"] = blockers
    return f"Updated task {task_id}: {line(task)}"


def line(task: dict[str, Any]) -> str:
    """One task on one line."""
    blocked = f" (blocked by {', '.join('#' + b for b in task['blocked_by'])})"
    return f"#{task['id']} [{task['status']}] {task['subject']}" + (
        blocked if task["blocked_by"] else ""
    )


def detail(book: Book, task_id: str) -> str:
    """A task with its description."""
    task = _find(book, task_id)
    return line(task) + (f"\n{task['description']}" if task["description"] else "")


def listing(book: Book) -> str:
    """Every task, one per line."""
    if not book["tasks"]:
        return "There are no tasks."
    return "\n".join(line(t) for t in book["tasks"])
