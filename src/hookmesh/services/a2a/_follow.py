"""`tasks/subscribe` on any replica: a task that runs here is tapped as the SDK does; one that
ran on a replica that is gone (or runs on another) is followed through its agent reply
(WatchReply) from the last event the task store holds, its updates saved to the shared store
as they come, so the task reaches its end state even when nobody else is left to write it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import QueueShutDown
from a2a.server.events.event_queue_v2 import EventQueueSource
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskManager, TaskStore
from a2a.types import a2a_pb2

from hookmesh.a2a import EVENT_METADATA_KEY
from hookmesh.services.a2a._executor import (
    REPLY_METADATA_KEY,
    SEQ_METADATA_KEY,
    HookmeshAgentExecutor,
    ReportingUpdater,
    caller_token,
)

_TERMINAL = frozenset(
    {
        a2a_pb2.TaskState.TASK_STATE_COMPLETED,
        a2a_pb2.TaskState.TASK_STATE_FAILED,
        a2a_pb2.TaskState.TASK_STATE_CANCELED,
        a2a_pb2.TaskState.TASK_STATE_REJECTED,
    }
)
_STOPS = _TERMINAL | {a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED}
"""A followed step's updates end at these states (the SDK's stream ends there too)."""


def where_task_stands(task: a2a_pb2.Task) -> tuple[str, int]:
    """The agent reply of the task's current step and the sequence number of its last event
    the task holds (the last status update merged its metadata into the task's)."""
    meta = task.metadata
    event = meta[EVENT_METADATA_KEY] if EVENT_METADATA_KEY in meta else None  # noqa: SIM401 - a Struct has no get
    if event is not None and "reply_id" in event and SEQ_METADATA_KEY in meta:
        return str(event["reply_id"]), int(meta[SEQ_METADATA_KEY])
    return (str(meta[REPLY_METADATA_KEY]) if REPLY_METADATA_KEY in meta else ""), 0


class DurableRequestHandler(DefaultRequestHandler):
    """The SDK's request handler, with `tasks/subscribe` and `tasks/cancel` that work on
    every replica."""

    def __init__(
        self, executor: HookmeshAgentExecutor, task_store: TaskStore, **options: Any
    ) -> None:
        super().__init__(agent_executor=executor, task_store=task_store, **options)
        self.executor = executor
        self.tasks = task_store

    async def on_subscribe_to_task(  # type: ignore[override]
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        local = await self._active_task_registry.get(params.id)
        task = await self.tasks.get(params.id, context)
        if local is not None or task is None or task.status.state in _TERMINAL:
            async for event in super().on_subscribe_to_task(params, context):
                yield event
            return
        yield task
        if task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED:
            return  # waits for the caller's answer: nothing runs
        async for event in self._follow(task, context):
            yield event

    async def _cancel_remote(  # type: ignore[override]
        self, task_id: str, task: a2a_pb2.Task, version: Any, context: ServerCallContext
    ) -> a2a_pb2.Task:
        """A task this replica does not hold: its step is ended on the agent service first
        (the SDK alone would only mark it canceled, and the reply would run on)."""
        await self.executor.stop_step(task.context_id, caller_token(context), task)
        return await super()._cancel_remote(task_id, task, version, context)

    async def _follow(
        self, task: a2a_pb2.Task, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        """The task's updates from its last saved one on, made from its agent reply's events
        as the executor makes them, each saved before it is yielded."""
        token = caller_token(context)
        client = self.executor.client
        reply_id, after = where_task_stands(task)
        queue = EventQueueSource()
        updater = ReportingUpdater(queue, task.id, task.context_id)
        manager = TaskManager(self.tasks, context, task.id, task.context_id, None)
        stream = client.watch(task.context_id, reply_id=reply_id, after_seq=after, token=token)
        run = asyncio.create_task(
            self.executor.follow_or_fail(stream, updater, task.context_id, token),
            name=f"a2a follow {task.id}",
        )
        run.add_done_callback(lambda _: asyncio.ensure_future(queue.close()))
        try:
            while True:
                try:
                    event = await queue.dequeue_event()
                except QueueShutDown:  # the follow is over
                    break
                await manager.process(event)
                queue.task_done()
                yield event
                if isinstance(event, a2a_pb2.TaskStatusUpdateEvent) and (
                    event.status.state in _STOPS
                ):
                    break
        finally:
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await run
