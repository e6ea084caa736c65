"""Runs A2A tasks on the agent service: a context is a session, a task step is a reply (or the
resume of a paused one), the final message becomes the task's artifact."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2
from google.protobuf import json_format

from hookmesh.a2a import (
    EVENT_METADATA_KEY,
    LIMITS_METADATA_KEY,
    OUTPUT_SCHEMA_METADATA_KEY,
    SPENT_METADATA_KEY,
    AnswerError,
    Awaiting,
    Limits,
    LimitsError,
    answer_of,
    blocks_from_parts,
    data_part,
    limits_of,
    parts_from_blocks,
    pause_parts,
)
from hookmesh.agent import Confirmation, ExternalResult, OutputSpec, new_id, output_spec_of
from hookmesh.client import AgentClient, AgentClientError, ReplyStream
from hookmesh.errors import SchemaError
from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT
from hookmesh.schema import (
    AgenticMessage,
    ReplyEndEvent,
    StructuredOutput,
    ToolCall,
    is_assistant,
    to_agentic,
)

log = logging.getLogger("hookmesh.a2a")

_LOOKUP_TIMEOUT = 30.0
REPLY_METADATA_KEY = "hookmeshReplyId"
"""Task metadata naming the agent reply of the task's first step."""
SEQ_METADATA_KEY = "hookmeshSeq"
"""Status update metadata: the sequence number of the hookmesh event it carries (a replica
that follows the task on resumes from there)."""
_SKIPPED = frozenset({"data_block_delta", "reply_end"})
"""Events not forwarded as progress (audio bytes; the end becomes the task's state)."""
_AWAITING: dict[str, Awaiting] = {
    "awaiting_confirmation": "confirmation",
    "awaiting_external_execution": "external_execution",
}


def caller_token(call: ServerCallContext) -> str | None:
    """The caller's bearer token (HTTP header or gRPC metadata), passed to the agent service
    (a secret: never logged)."""
    value: Any = (call.state.get("headers") or {}).get("authorization")
    grpc_context = call.state.get("grpc_context")
    if value is None and grpc_context is not None:
        for key, item in grpc_context.invocation_metadata() or ():
            if key == "authorization":
                value = item
    if not isinstance(value, str):
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class ReportingUpdater(TaskUpdater):
    """A task updater whose final status update carries what the reply spent (the limits
    extension's ``hookmeshSpent``), once the reply reported it."""

    spent: Any = None

    async def update_status(
        self,
        state: a2a_pb2.TaskState,
        message: a2a_pb2.Message | None = None,
        timestamp: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if self.spent is not None and state in _REPORTED:
            metadata = {**(metadata or {}), SPENT_METADATA_KEY: self.spent}
        await super().update_status(state, message, timestamp, metadata)


_REPORTED = frozenset(
    {
        a2a_pb2.TaskState.TASK_STATE_COMPLETED,
        a2a_pb2.TaskState.TASK_STATE_FAILED,
        a2a_pb2.TaskState.TASK_STATE_CANCELED,
        a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED,
    }
)


def _message(updater: TaskUpdater, text: str, data: Any = None) -> a2a_pb2.Message:
    parts = [a2a_pb2.Part(text=text)]
    if data is not None:
        parts.append(data_part(data))
    return updater.new_agent_message(parts)


async def _failed(updater: TaskUpdater, exc: AgentClientError) -> None:
    reason = exc.reason or exc.code.name
    await updater.failed(_message(updater, exc.message, {"reason": reason}))


class HookmeshAgentExecutor(AgentExecutor):
    """The A2A side of one agent service.

    A task's context id is the session id. A message without a task (or for a finished one)
    starts a reply; a message for a task in ``input-required`` answers the paused reply and
    resumes it. Progress travels as ``working`` status updates whose metadata holds the
    hookmesh event (``hookmeshEvent``); the reply's end sets the task's state: completed
    (the final message's blocks as the ``answer`` artifact), input-required (a paused reply:
    what it waits for, see `pause_parts`), failed, or canceled. A message whose metadata
    holds ``hookmeshOutputSchema`` asks for a structured answer: the artifact is then one
    data part, the answer's JSON value.

    Args:
        client: The agent service's client (the caller's token is passed per call).
        run_timeout: Seconds one reply may take.
    """

    def __init__(self, client: AgentClient, run_timeout: float) -> None:
        self.client = client
        self.run_timeout = run_timeout

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task_id, session = context.task_id or "", context.context_id or ""
        assert message is not None
        updater = ReportingUpdater(event_queue, task_id, session)
        token = caller_token(context.call_context)
        task = context.current_task
        reply_id = new_id()
        if task is None:
            first = a2a_pb2.Task(
                id=task_id,
                context_id=session,
                status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
            # NOTE(durability): the reply's id in the task, so a replica that did not run it
            # can follow it (tasks/subscribe) when this one is gone.
            first.metadata[REPLY_METADATA_KEY] = reply_id
            await event_queue.enqueue_event(first)
        try:
            if (
                task is not None
                and task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
            ):
                stream = await self._resume(session, message, token, updater)
                if stream is None:
                    return
            else:
                user = AgenticMessage(role="user", blocks=blocks_from_parts(message.parts))
                stream = self.client.reply(
                    [user],
                    session_id=session,
                    timeout=self.run_timeout,
                    token=token,
                    reply_id=reply_id,
                    output=_output_of(message),
                    limits=_limits_of(message),
                )
            await updater.start_work()
            await self.follow(stream, updater, session, token)
        except AgentClientError as exc:
            await _failed(updater, exc)
        except SchemaError as exc:
            field = exc.violations[0].field
            await updater.failed(
                _message(updater, exc.message, {"reason": exc.reason, "field": field})
            )
        except LimitsError as exc:
            await updater.failed(
                _message(updater, str(exc), {"reason": "INVALID_LIMITS", "field": exc.field})
            )

    async def follow_or_fail(
        self, stream: ReplyStream, updater: TaskUpdater, session: str, token: str | None
    ) -> None:
        """`follow`, the task failed when the agent service refuses or the call fails."""
        try:
            await self.follow(stream, updater, session, token)
        except AgentClientError as exc:
            await _failed(updater, exc)

    async def _resume(
        self,
        session: str,
        message: a2a_pb2.Message,
        token: str | None,
        updater: TaskUpdater,
    ) -> ReplyStream | None:
        info = await self.client.get_session(session, timeout=_LOOKUP_TIMEOUT, token=token)
        awaiting = _AWAITING.get(info.status)
        if awaiting is None:
            await updater.failed(_message(updater, "the paused reply is gone"))
            return None
        try:
            # Limits first: bad ones must leave the task asking, as a bad answer does, since
            # the reply underneath stays paused (a failed task would strand it).
            limits = _limits_of(message)
            answer = answer_of(awaiting, info.pending_calls, message.parts)
        except (AnswerError, LimitsError) as exc:
            await updater.requires_input(
                updater.new_agent_message(
                    [a2a_pb2.Part(text=str(exc)), *pause_parts(awaiting, info.pending_calls)[1:]]
                )
            )
            return None
        return self.client.resume(
            session,
            confirmations=[Confirmation(**c) for c in answer.confirmations],
            external_results=[
                ExternalResult(call_id=cid, output=out, state=state)  # type: ignore[arg-type]
                for cid, out, state in answer.external_results
            ],
            timeout=self.run_timeout,
            token=token,
            limits=limits,
        )

    async def follow(
        self, stream: ReplyStream, updater: TaskUpdater, session: str, token: str | None
    ) -> None:
        """Turn the reply's events into the task's updates until the reply ends, then set
        the task's state from its end."""
        end: ReplyEndEvent | None = None
        paused: list[ToolCall] = []
        try:
            async for event in stream:
                own = not event.source_path
                if own and event.type == "reply_end":
                    end = event
                elif own and event.type == "custom" and event.name == SPENT_EVENT:
                    if isinstance(updater, ReportingUpdater):
                        updater.spent = event.value
                elif own and event.type in ("require_user_confirm", "require_external_execution"):
                    paused = list(event.tool_calls)
                if event.type not in _SKIPPED or not own:
                    await updater.update_status(
                        a2a_pb2.TaskState.TASK_STATE_WORKING,
                        metadata={
                            EVENT_METADATA_KEY: event.model_dump(mode="json"),
                            SEQ_METADATA_KEY: stream.seq,
                        },
                    )
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()
        if end is None:
            await updater.failed(_message(updater, "the agent's stream ended early"))
        elif end.finish_reason == "completed":
            await self._complete(updater, session, token, end.reply_id, end.output)
        elif end.finish_reason in _AWAITING:
            awaiting = _AWAITING[end.finish_reason]
            if not paused:  # paused before this stream began (a follower's): ask the session
                info = await self.client.get_session(session, timeout=_LOOKUP_TIMEOUT, token=token)
                paused = list(info.pending_calls)
            await updater.requires_input(updater.new_agent_message(pause_parts(awaiting, paused)))
        elif end.finish_reason == "interrupted":
            await updater.cancel()
        else:
            error = end.error
            text = error.message if error is not None else f"the reply ended: {end.finish_reason}"
            reason = error.reason if error is not None else end.finish_reason.upper()
            await updater.failed(_message(updater, text, {"reason": reason}))

    async def _complete(
        self,
        updater: TaskUpdater,
        session: str,
        token: str | None,
        reply_id: str,
        output: StructuredOutput | None,
    ) -> None:
        # NOTE(durability): the artifact is named by the reply, so a second replica following
        # the same reply writes the same artifact, not another one.
        artifact_id = f"answer-{reply_id}"
        if output is not None:
            await updater.add_artifact(
                [data_part(output.as_json())],
                artifact_id=artifact_id,
                name="answer",
                last_chunk=True,
            )
            await updater.complete()
            return
        info = await self.client.get_session(session, timeout=_LOOKUP_TIMEOUT, token=token)
        final = next((m for m in reversed(info.context) if is_assistant(m)), None)
        blocks = to_agentic([final])[0].blocks if final is not None else []
        parts = parts_from_blocks(blocks) or [a2a_pb2.Part(text="")]
        await updater.add_artifact(parts, artifact_id=artifact_id, name="answer", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Interrupt the session's running reply (the task's own stream is cancelled too), or
        answer a paused one (its calls denied, or interrupted) so the context can go on; then
        mark the task canceled."""
        session = context.context_id or ""
        await self.stop_step(session, caller_token(context.call_context), context.current_task)
        updater = TaskUpdater(event_queue, context.task_id or "", session)
        await updater.cancel()

    async def stop_step(self, session: str, token: str | None, task: a2a_pb2.Task | None) -> None:
        """End the task's step on the agent service, whichever replica runs it: interrupt the
        running reply, or answer a paused one as canceled (best effort: a step already over
        is left alone)."""
        with contextlib.suppress(AgentClientError):
            if (
                task is not None
                and task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
            ):
                await self._answer_canceled(session, token)
            else:
                await self.client.interrupt(session, timeout=_LOOKUP_TIMEOUT, token=token)

    async def _answer_canceled(self, session: str, token: str | None) -> None:
        info = await self.client.get_session(session, timeout=_LOOKUP_TIMEOUT, token=token)
        awaiting = _AWAITING.get(info.status)
        if awaiting is None:
            return
        calls = info.pending_calls
        stream = self.client.resume(
            session,
            confirmations=[
                Confirmation(call_id=c.id, confirmed=False, reason="the task was canceled")
                for c in calls
            ]
            if awaiting == "confirmation"
            else (),
            external_results=[
                ExternalResult(call_id=c.id, output="the task was canceled", state="interrupted")
                for c in calls
            ]
            if awaiting == "external_execution"
            else (),
            timeout=self.run_timeout,
            token=token,
        )
        async for _ in stream:  # the reply goes on to its end; nobody reads it
            pass


def _output_of(message: a2a_pb2.Message) -> OutputSpec | None:
    """The structured answer a message's metadata asks for, if any.

    Raises:
        SchemaError: The metadata holds no valid output schema.
    """
    if OUTPUT_SCHEMA_METADATA_KEY not in message.metadata:
        return None
    raw = json_format.MessageToDict(message.metadata).get(OUTPUT_SCHEMA_METADATA_KEY)
    return output_spec_of(raw, f"metadata.{OUTPUT_SCHEMA_METADATA_KEY}")


def _limits_of(message: a2a_pb2.Message) -> Limits | None:
    """The limits a message's metadata sets (the limits extension), if any.

    Raises:
        LimitsError: The metadata holds no valid limits object.
    """
    if LIMITS_METADATA_KEY not in message.metadata:
        return None
    return limits_of(json_format.MessageToDict(message.metadata).get(LIMITS_METADATA_KEY))
