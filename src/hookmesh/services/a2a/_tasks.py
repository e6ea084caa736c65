"""Where A2A tasks are kept: the SDK's database task store on SQLite (one process) or
PostgreSQL (replicas), so `tasks/get`, `tasks/list` and `tasks/subscribe` work on any replica,
also after the one that ran a task died; or in memory, lost with the process. Either way at
most `max_tasks`, so callers (with or without a token) cannot grow it without bound, one task
per request."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore
from a2a.types import a2a_pb2

from hookmesh._files import private_file

_FINISHED = frozenset(
    {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
)


class BoundedTaskStore(TaskStore):
    """At most `max_tasks` tasks over all callers. One more evicts the oldest finished task
    (completed, failed, canceled, rejected), or, when none is finished, the oldest task: a
    paused task evicted that way can no longer be resumed (its session stays in the agent
    service).

    Args:
        max_tasks: The cap.
    """

    def __init__(self, max_tasks: int) -> None:
        self._inner = InMemoryTaskStore()
        self._max = max_tasks
        self._order: OrderedDict[tuple[str, str], tuple[ServerCallContext, int]] = OrderedDict()
        """(owner, task id) → the context that saved it (to delete it as its owner), its
        state; oldest first."""

    async def save(self, task: a2a_pb2.Task, context: ServerCallContext) -> None:
        key = (resolve_user_scope(context), task.id)
        self._order[key] = (context, task.status.state)
        await self._inner.save(task, context)
        while len(self._order) > self._max:
            await self._evict(key)

    async def _evict(self, keep: tuple[str, str]) -> None:
        victim = next(
            (k for k, (_, state) in self._order.items() if state in _FINISHED and k != keep),
            next(k for k in self._order if k != keep),
        )
        owner_context, _ = self._order.pop(victim)
        await self._inner.delete(victim[1], owner_context)

    async def get(self, task_id: str, context: ServerCallContext) -> a2a_pb2.Task | None:
        return await self._inner.get(task_id, context)

    async def list(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        return await self._inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._order.pop((resolve_user_scope(context), task_id), None)
        await self._inner.delete(task_id, context)


class _CappedDatabaseTaskStore(DatabaseTaskStore):
    """The SDK's database store, pruned to `max_tasks` like `BoundedTaskStore` (oldest
    finished first) whenever a task is made (its first save: state submitted), so the count
    is read once per task, not per update. Replicas pruning at once may leave a few more."""

    def __init__(self, engine: Any, max_tasks: int) -> None:
        super().__init__(engine)  # the SDK's table, `tasks`
        self._max = max_tasks

    async def save(self, task: a2a_pb2.Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if task.status.state == a2a_pb2.TASK_STATE_SUBMITTED:
            await self.prune()

    async def prune(self) -> int:
        """Delete the tasks beyond `max_tasks`; how many."""
        from sqlalchemy import delete, func, select

        model = self.task_model
        async with self.async_session_maker.begin() as session:
            total = await session.scalar(select(func.count()).select_from(model))
            excess = (total or 0) - self._max
            if excess <= 0:
                return 0
            rows = (
                await session.execute(
                    select(model.id, model.status).order_by(model.last_updated.asc())
                )
            ).all()
            finished = [i for i, status in rows if _state(status) in _FINISHED]
            others = [i for i, status in rows if _state(status) not in _FINISHED]
            victims = (finished + others)[:excess]
            await session.execute(delete(model).where(model.id.in_(victims)))
        return len(victims)


async def forget_tasks(url: str, context_ids: Sequence[str]) -> int:
    """Delete the tasks of the store at `url` whose context is one of `context_ids` (the A2A
    server uses a task's context id as its agent session id); how many went.

    Raises:
        ValueError: `url` is not a database the SDK's task store uses.
        OSError: The database cannot be opened.
    """
    from sqlalchemy import delete

    async with _database(url) as store:
        if not context_ids:
            return 0
        model = store.task_model
        async with store.async_session_maker.begin() as session:
            result: Any = await session.execute(
                delete(model).where(model.context_id.in_(context_ids))
            )
        return int(result.rowcount or 0)


@asynccontextmanager
async def _database(url: str) -> AsyncIterator[_CappedDatabaseTaskStore]:
    """The database task store at `url`, opened for one erasure or export."""
    if url == "memory":
        raise ValueError("an in-memory A2A task store cannot be reached from another process")
    opened = await open_task_store(url, max_tasks=1)  # never saves: the cap is unused
    try:
        store = opened.store
        assert isinstance(store, _CappedDatabaseTaskStore)
        yield store
    finally:
        await opened.close()


async def export_tasks(
    url: str, context_ids: Sequence[str], page: int = 100
) -> AsyncIterator[list[dict[str, Any]]]:
    """The tasks of the store at `url` whose context is one of `context_ids`, in pages of up
    to `page`, by context then id: each as its stored JSON columns (status, artifacts,
    history and metadata in the A2A JSON form) with ``id``, ``context_id`` and
    ``last_updated`` (ISO 8601, or None).

    Raises:
        ValueError: `url` is not a database the SDK's task store uses.
        OSError: The database cannot be opened.
    """
    from sqlalchemy import select

    async with _database(url) as store:
        model = store.task_model
        columns = (model.id, model.context_id, model.last_updated, model.status)
        extra = (model.artifacts, model.history, model.task_metadata)
        ordered = sorted(set(context_ids))
        for start in range(0, len(ordered), page):
            async with store.async_session_maker() as session:
                rows = (
                    await session.execute(
                        select(*columns, *extra)
                        .where(model.context_id.in_(ordered[start : start + page]))
                        .order_by(model.context_id, model.id)
                    )
                ).all()
            if rows:
                yield [_task_record(row) for row in rows]


def _task_record(row: Any) -> dict[str, Any]:
    task_id, context_id, updated, status, artifacts, history, metadata = row
    return {
        "id": task_id,
        "context_id": context_id,
        "last_updated": updated.isoformat() if updated is not None else None,
        "status": _plain(status),
        "artifacts": _plain(artifacts),
        "history": _plain(history),
        "metadata": _plain(metadata),
    }


def _plain(value: Any) -> Any:
    """A JSON column's value as JSON data (the SDK may hand back protobuf messages)."""
    if hasattr(value, "DESCRIPTOR"):
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _state(status: Any) -> int:
    name = status.get("state", "") if isinstance(status, dict) else ""
    value = a2a_pb2.TaskState.DESCRIPTOR.values_by_name.get(name)
    return value.number if value is not None else 0


@dataclass
class OpenTaskStore:
    """A task store and what closes it."""

    store: TaskStore
    engine: Any = None

    async def close(self) -> None:
        """Release the store's connections."""
        if self.engine is not None:
            await self.engine.dispose()


def _on_connect(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


async def open_task_store(url: str, max_tasks: int) -> OpenTaskStore:
    """Open the store `url` names and create its table if needed.

    Args:
        url: ``memory``, ``sqlite:///path`` or ``postgresql://...`` (a secret: never logged).
        max_tasks: The most tasks it keeps (over all callers).

    Raises:
        ValueError: Another kind of URL.
        OSError: The database cannot be opened.
    """
    if url == "memory":
        return OpenTaskStore(BoundedTaskStore(max_tasks))
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.startswith("sqlite:///"):
        private_file(Path(url.removeprefix("sqlite:///")))
        engine = create_async_engine("sqlite+aiosqlite:///" + url.removeprefix("sqlite:///"))
        event.listen(engine.sync_engine, "connect", _on_connect)
    elif url.startswith(("postgresql://", "postgres://")):
        rest = url.partition("://")[2]
        engine = create_async_engine(f"postgresql+psycopg://{rest}", pool_size=4)
    else:
        raise ValueError("the A2A task store is memory, sqlite:///path or postgresql://...")
    store = _CappedDatabaseTaskStore(engine, max_tasks)
    try:
        await store.initialize()
    except Exception as exc:
        await engine.dispose()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(f"the A2A task store cannot be opened: {first}") from None
    return OpenTaskStore(store, engine)
