"""The A2A server's task store: the a2a-sdk's in-memory store with a cap, so callers (with or
without a token) cannot grow the process without bound, one task per request."""

from __future__ import annotations

from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import a2a_pb2

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
