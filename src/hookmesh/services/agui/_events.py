"""The AG-UI events of one run, made from the agent's hookmesh events (the mapping table of
docs/services/agui.md)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from hookmesh.schema import (
    AgentEvent,
    TextBlock,
    ToolCall,
    ToolOutputBlock,
    Usage,
    asked_by,
    make_tool_result,
    path_names,
)
from hookmesh.schema.agui import message_to_agui

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Run the call (true) or not (false)."},
        "reason": {"type": "string", "description": "Why not; shown to the model."},
        "arguments": {
            "type": "object",
            "description": "With approved: run the call with these arguments instead (an edit).",
        },
    },
    "required": ["approved"],
}
"""What a resume entry answering a confirmation interrupt carries in its payload."""

HINT_EVENT = "hookmesh.hint"
DATA_START_EVENT = "hookmesh.data_block_start"
DATA_DELTA_EVENT = "hookmesh.data_block_delta"
DATA_END_EVENT = "hookmesh.data_block_end"
NESTED_EVENT = "hookmesh.nested"
_EXTERNAL_PREFIX = "external_"
"""Name prefix of the hidden calls through which a sub-agent's external calls are passed up
(docs/multi-agent.md, Nested external calls)."""


def _now() -> int:
    return int(time.time() * 1000)


def _pointer(key: str) -> str:
    """`key` as one RFC 6901 reference token."""
    return key.replace("~", "~0").replace("/", "~1")


def _token_usage(model: str, u: Usage) -> TokenUsage:
    return TokenUsage(
        model=model or None,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.input_tokens + u.output_tokens,
        reasoning_tokens=u.reasoning_tokens,
        cached_input_tokens=u.cache_read_tokens,
        cache_write_input_tokens=u.cache_creation_tokens,
    )


def confirmation_interrupt(call: ToolCall) -> Interrupt:
    """The interrupt asking the user to approve one call (its id is the call's id)."""
    path = asked_by(call)
    who = f"{'/'.join(path)} asks: " if path else ""
    metadata: dict[str, Any] = {"toolName": call.name, "arguments": call.arguments}
    if path:
        metadata["askedBy"] = path
    return Interrupt(
        id=call.id,
        reason="tool_call",
        message=f"{who}Allow {call.name} with {call.arguments or '{}'}?",
        tool_call_id=call.id,
        response_schema=APPROVAL_SCHEMA,
        metadata={"hookmesh": metadata},
    )


def front_end_call(call: ToolCall) -> tuple[str, str, list[str]]:
    """What a front-end runs for `call` the reply waits on: the tool's name, its arguments
    (JSON text) and who asks. A sub-agent's external call passed up (a hidden
    ``external_<name>`` call naming the ``tool`` to run, its ``arguments`` and the ``path``
    of agents down to the one that called) is the tool it stands for, asked by that path;
    any other call is itself, asked by no one."""
    path = asked_by(call)
    if not path:
        return call.name, call.arguments, []
    spec = json.loads(call.arguments)  # asked_by read it: an object naming tool and arguments
    return str(spec["tool"]), str(spec["arguments"]), path


def front_end_metadata(call: ToolCall) -> dict[str, Any] | None:
    """``{"hookmesh": {"askedBy", "via"}}`` for a sub-agent's external call passed up (who
    asks, and the hidden call it came through); None for any other call."""
    path = asked_by(call)
    return {"hookmesh": {"askedBy": path, "via": call.name}} if path else None


class RunEvents:
    """Translates one run's hookmesh events into AG-UI events, keeping what spans events
    (open messages, the step, tool output, usage) so every run ends well-formed.

    Args:
        thread_id: The run's thread (the hookmesh session).
        run_id: The run.
        answered: Tool calls whose results the client sent in this run's input: their
            results are not sent back.
    """

    def __init__(self, thread_id: str, run_id: str, answered: frozenset[str] = frozenset()):
        self.thread_id = thread_id
        self.run_id = run_id
        self._answered = answered
        self._open_texts: set[str] = set()
        self._open_reasoning: set[str] = set()
        self._open_calls: set[str] = set()
        self._held: dict[str, tuple[str, str | None, list[str]]] = {}
        self._text_id = ""
        self._step = 0
        self._step_open = False
        self._results: dict[str, tuple[str, list[ToolOutputBlock]]] = {}
        self._usage: dict[str, Usage] = {}
        self._run_usage = Usage()
        self._confirm: list[ToolCall] = []
        self._external: list[ToolCall] = []
        self.finished = False
        """A terminal event (RUN_FINISHED or RUN_ERROR) was produced."""

    def start(self, state: dict[str, Any], messages: list[Any] | None) -> Iterator[BaseEvent]:
        """RUN_STARTED, the state snapshot (`state` plus the gateway's ``hookmesh`` key) and,
        when given, a snapshot of the client's own `messages`."""
        yield RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, timestamp=_now())
        snapshot = {
            **state,
            "hookmesh": {
                "sessionId": self.thread_id,
                "usage": _usage_json(Usage()),
                "middlewares": {},
            },
        }
        yield StateSnapshotEvent(snapshot=snapshot, timestamp=_now())
        if messages is not None:
            yield MessagesSnapshotEvent(messages=messages, timestamp=_now())

    def map(self, event: AgentEvent) -> Iterator[BaseEvent]:
        """The AG-UI events for one hookmesh event (often one, sometimes none)."""
        if event.source_path and not event.type.startswith("text_block"):
            yield from _nested(event)
            return
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            yield from handler(self, event)

    def fail(self, message: str, code: str) -> Iterator[BaseEvent]:
        """Close what is open, then RUN_ERROR."""
        yield from self._close()
        self.finished = True
        yield RunErrorEvent(message=message, code=code or None, timestamp=_now())

    # --- handlers ---------------------------------------------------------------------------

    def _model_call_start(self, unused_event: Any) -> Iterator[BaseEvent]:
        yield from self._finish_step()
        self._step += 1
        self._step_open = True
        self._text_id = ""
        yield StepStartedEvent(step_name=f"step {self._step}", timestamp=_now())

    def _model_call_end(self, event: Any) -> Iterator[BaseEvent]:
        if event.usage is None:
            return
        name = event.model_name
        self._usage[name] = self._usage.get(name, Usage()) + event.usage
        self._run_usage = self._run_usage + event.usage
        op = {"op": "replace", "path": "/hookmesh/usage", "value": _usage_json(self._run_usage)}
        yield StateDeltaEvent(delta=[op], timestamp=_now())

    def _text_start(self, event: Any) -> Iterator[BaseEvent]:
        self._open_texts.add(event.block_id)
        self._text_id = event.block_id
        yield TextMessageStartEvent(message_id=event.block_id, role="assistant", timestamp=_now())

    def _text_delta(self, event: Any) -> Iterator[BaseEvent]:
        if event.block_id not in self._open_texts:  # re-attached mid-block: open it here
            yield from self._text_start(event)
        if event.delta:
            yield TextMessageContentEvent(
                message_id=event.block_id, delta=event.delta, timestamp=_now()
            )

    def _text_end(self, event: Any) -> Iterator[BaseEvent]:
        self._open_texts.discard(event.block_id)
        yield TextMessageEndEvent(message_id=event.block_id, timestamp=_now())

    def _reasoning_start(self, event: Any) -> Iterator[BaseEvent]:
        self._open_reasoning.add(event.block_id)
        yield ReasoningStartEvent(message_id=event.block_id, timestamp=_now())
        yield ReasoningMessageStartEvent(message_id=event.block_id, timestamp=_now())

    def _reasoning_delta(self, event: Any) -> Iterator[BaseEvent]:
        if event.block_id not in self._open_reasoning:  # re-attached mid-block
            yield from self._reasoning_start(event)
        if event.delta:
            yield ReasoningMessageContentEvent(
                message_id=event.block_id, delta=event.delta, timestamp=_now()
            )

    def _reasoning_end(self, event: Any) -> Iterator[BaseEvent]:
        self._open_reasoning.discard(event.block_id)
        yield ReasoningMessageEndEvent(message_id=event.block_id, timestamp=_now())
        yield ReasoningEndEvent(message_id=event.block_id, timestamp=_now())

    def _call_start(self, event: Any) -> Iterator[BaseEvent]:
        self._open_calls.add(event.call_id)
        if event.name.startswith(_EXTERNAL_PREFIX):  # may stand for a sub-agent's call
            self._held[event.call_id] = (event.name, self._text_id or None, [])
            return
        yield ToolCallStartEvent(
            tool_call_id=event.call_id,
            tool_call_name=event.name,
            parent_message_id=self._text_id or None,
            timestamp=_now(),
        )

    def _call_delta(self, event: Any) -> Iterator[BaseEvent]:
        held = self._held.get(event.call_id)
        if held is not None:
            held[2].append(event.delta)
        elif event.delta:
            yield ToolCallArgsEvent(tool_call_id=event.call_id, delta=event.delta, timestamp=_now())

    def _call_end(self, event: Any) -> Iterator[BaseEvent]:
        self._open_calls.discard(event.call_id)
        yield from self._release(event.call_id)
        yield ToolCallEndEvent(tool_call_id=event.call_id, timestamp=_now())

    def _release(self, call_id: str) -> Iterator[BaseEvent]:
        """TOOL_CALL_START and TOOL_CALL_ARGS of a held ``external_…`` call, now that its
        arguments are whole: a sub-agent's external call passed up is sent as the tool the
        front-end runs (with who asks in its metadata), any other as it came."""
        held = self._held.pop(call_id, None)
        if held is None:
            return
        name, parent, deltas = held
        call = ToolCall(id=call_id, name=name, arguments="".join(deltas))
        tool, arguments, _ = front_end_call(call)
        yield ToolCallStartEvent(
            tool_call_id=call_id,
            tool_call_name=tool,
            parent_message_id=parent,
            metadata=front_end_metadata(call),
            timestamp=_now(),
        )
        if arguments:
            yield ToolCallArgsEvent(tool_call_id=call_id, delta=arguments, timestamp=_now())

    def _result_start(self, event: Any) -> Iterator[BaseEvent]:
        if event.call_id not in self._answered:
            self._results[event.call_id] = (event.name, [])
        yield from ()

    def _result_delta(self, event: Any) -> Iterator[BaseEvent]:
        if event.call_id not in self._results and event.call_id not in self._answered:
            self._results[event.call_id] = ("", [])  # re-attached after its start
        pending = self._results.get(event.call_id)
        if pending is not None:
            output = pending[1]
            if event.media is not None:
                output.append(event.media)
            elif output and isinstance(last := output[-1], TextBlock):
                output[-1] = TextBlock(text=last.text + event.text)
            else:
                output.append(TextBlock(text=event.text))
        yield from ()

    def _result_end(self, event: Any) -> Iterator[BaseEvent]:
        pending = self._results.pop(event.call_id, None)
        if pending is None and event.call_id not in self._answered:
            pending = ("", [])  # re-attached after its start and its output
        if pending is None:
            return
        name, output = pending
        message = message_to_agui(make_tool_result("flat", event.call_id, name, output))
        yield ToolCallResultEvent(
            message_id=f"{event.call_id}-result",
            tool_call_id=event.call_id,
            content=message["content"],
            role="tool",
            metadata=None if event.state == "success" else {"hookmesh": {"state": event.state}},
            timestamp=_now(),
        )

    def _data_start(self, event: Any) -> Iterator[BaseEvent]:
        value = {"blockId": event.block_id, "mediaType": event.media_type, "name": event.name}
        yield CustomEvent(name=DATA_START_EVENT, value=value, timestamp=_now())

    def _data_delta(self, event: Any) -> Iterator[BaseEvent]:
        data = base64.b64encode(event.data).decode("ascii")
        value = {"blockId": event.block_id, "data": data}
        yield CustomEvent(name=DATA_DELTA_EVENT, value=value, timestamp=_now())

    def _data_end(self, event: Any) -> Iterator[BaseEvent]:
        yield CustomEvent(name=DATA_END_EVENT, value={"blockId": event.block_id}, timestamp=_now())

    def _hint(self, event: Any) -> Iterator[BaseEvent]:
        value = {"blockId": event.block_id, "source": event.source, "text": event.text}
        yield CustomEvent(name=HINT_EVENT, value=value, timestamp=_now())

    def _custom(self, event: Any) -> Iterator[BaseEvent]:
        yield CustomEvent(name=event.name, value=event.value, timestamp=_now())
        op = {
            "op": "add",
            "path": f"/hookmesh/middlewares/{_pointer(event.name)}",
            "value": event.value,
        }
        yield StateDeltaEvent(delta=[op], timestamp=_now())

    def _confirm_calls(self, event: Any) -> Iterator[BaseEvent]:
        self._confirm.extend(event.tool_calls)
        yield from ()

    def _external_calls(self, event: Any) -> Iterator[BaseEvent]:
        self._external.extend(event.tool_calls)
        yield from ()

    def _reply_end(self, event: Any) -> Iterator[BaseEvent]:
        if event.finish_reason == "error":
            error = event.error
            yield from self.fail(
                error.message if error else "the reply failed", error.reason if error else ""
            )
            return
        yield from self._close()
        outcome: Any
        if event.finish_reason == "awaiting_confirmation":
            interrupts = [confirmation_interrupt(c) for c in self._confirm]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        elif event.finish_reason == "interrupted":
            outcome = RunFinishedCancelledOutcome()
        else:
            pending = [c.id for c in self._external] or None
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending)
        usage = [_token_usage(m, u) for m, u in self._usage.items()] or None
        self.finished = True
        result: dict[str, Any] = {"finishReason": event.finish_reason}
        if event.output is not None:
            result["output"] = event.output.as_json()
            result["outputSchema"] = event.output.schema_name
        yield RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            result=result,
            outcome=outcome,
            usage=usage,
            timestamp=_now(),
        )

    # --- closing ----------------------------------------------------------------------------

    def _finish_step(self) -> Iterator[BaseEvent]:
        if self._step_open:
            self._step_open = False
            yield StepFinishedEvent(step_name=f"step {self._step}", timestamp=_now())

    def _close(self) -> Iterator[BaseEvent]:
        """End every open message, reasoning block, tool call and step (a failed or cut
        reply may leave them open)."""
        for message_id in sorted(self._open_texts):
            yield TextMessageEndEvent(message_id=message_id, timestamp=_now())
        for message_id in sorted(self._open_reasoning):
            yield ReasoningMessageEndEvent(message_id=message_id, timestamp=_now())
            yield ReasoningEndEvent(message_id=message_id, timestamp=_now())
        for call_id in sorted(self._open_calls):
            yield from self._release(call_id)
            yield ToolCallEndEvent(tool_call_id=call_id, timestamp=_now())
        self._open_texts.clear()
        self._open_reasoning.clear()
        self._open_calls.clear()
        yield from self._finish_step()


def _usage_json(u: Usage) -> dict[str, int]:
    return {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens}


def _nested(event: AgentEvent) -> Iterator[BaseEvent]:
    """A sub-agent's progress as ``hookmesh.nested`` (a sub-agent's end or pause neither
    ends nor pauses the run, its steps are not the run's): its calls, results, asks and end,
    each with the agents' path. Its text is sent as the run's text messages are (a handoff's
    receiver speaks for the reply); its other events are not sent."""
    value: dict[str, Any] = {"path": path_names(event), "type": event.type}
    match event.type:
        case "tool_call_start":
            value |= {"toolCallId": event.call_id, "toolName": event.name}
        case "tool_result_end":
            value |= {"toolCallId": event.call_id, "state": event.state}
        case "require_user_confirm" | "require_external_execution":
            calls = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in event.tool_calls
            ]
            value["toolCalls"] = calls
        case "reply_end":
            value["finishReason"] = event.finish_reason
        case _:
            return
    yield CustomEvent(name=NESTED_EVENT, value=value, timestamp=_now())


_HANDLERS: dict[str, Callable[[RunEvents, Any], Iterator[BaseEvent]]] = {
    "model_call_start": RunEvents._model_call_start,
    "model_call_end": RunEvents._model_call_end,
    "text_block_start": RunEvents._text_start,
    "text_block_delta": RunEvents._text_delta,
    "text_block_end": RunEvents._text_end,
    "reasoning_block_start": RunEvents._reasoning_start,
    "reasoning_block_delta": RunEvents._reasoning_delta,
    "reasoning_block_end": RunEvents._reasoning_end,
    "tool_call_start": RunEvents._call_start,
    "tool_call_delta": RunEvents._call_delta,
    "tool_call_end": RunEvents._call_end,
    "tool_result_start": RunEvents._result_start,
    "tool_result_delta": RunEvents._result_delta,
    "tool_result_end": RunEvents._result_end,
    "data_block_start": RunEvents._data_start,
    "data_block_delta": RunEvents._data_delta,
    "data_block_end": RunEvents._data_end,
    "hint_block": RunEvents._hint,
    "custom": RunEvents._custom,
    "require_user_confirm": RunEvents._confirm_calls,
    "require_external_execution": RunEvents._external_calls,
    "reply_end": RunEvents._reply_end,
}
"""What each hookmesh event becomes; reply_start is covered by RUN_STARTED, sent first."""
