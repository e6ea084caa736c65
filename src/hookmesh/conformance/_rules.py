"""The conformance rules: each drives the sidecar at the message level and checks its answers
against the ConformanceMiddleware spec (docs/remote-protocol.md)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hookmesh.conformance._session import (
    Session,
    assistant,
    check,
    customs,
    invocation,
    last_state,
)
from hookmesh.schema import MessageKind
from hookmesh.v1 import event_pb2 as ev
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc

SHORT_SILENCE = 0.3
"""Seconds a sidecar must stay silent where the protocol says it sends nothing."""


@dataclass
class Target:
    """The sidecar under test."""

    stub: pb_grpc.MiddlewareServiceStub
    metadata: tuple[tuple[str, str], ...]
    timeout: float
    token_required: bool

    def session(self) -> Session:
        return Session(self.stub, self.metadata, self.timeout)


Rule = Callable[[Target, MessageKind], Awaitable[None]]


def _req(invocation_id: str, **message: Any) -> pb.InterceptRequest:
    return pb.InterceptRequest(invocation_id=invocation_id, **message)


def _item(event: ev.AgentEvent, state: dict[str, Any] | None = None) -> pb.DownstreamItem:
    item = pb.DownstreamItem(event=event)
    if state:
        item.state.update(state)
    return item


def _delta(text: str) -> ev.AgentEvent:
    return ev.AgentEvent(
        reply_id="conformance-reply",
        text_block_delta=ev.TextBlockDeltaEvent(block_id="b1", delta=text),
    )


def _start() -> ev.AgentEvent:
    return ev.AgentEvent(
        reply_id="conformance-reply", model_call_start=ev.ModelCallStartEvent(model_name="m")
    )


_END = pb.DownstreamOutcome(stream_end=pb.StreamEnd())
_REASONING = {"reasoning": pb.ReasoningArgs(tool_choice="auto")}


async def _open(t: Target, kind: MessageKind, hook: int, marker: str = "", **kw: Any) -> Session:
    session = t.session()
    await session.send(invocation("1", hook, kind, marker, **kw))
    return session


def _arm(message: pb.InterceptResponse) -> str:
    return message.WhichOneof("message") or ""


async def _events_through(session: Session, items: list[ev.AgentEvent], drop: bool) -> None:
    for event in items:
        await session.send(_req("1", item=_item(event)))
        verdict = (await session.expect("1", "verdict"))[-1].verdict
        check(verdict.drop == drop, f"verdict drop={verdict.drop}, expected {drop}")
        check(not verdict.final, "verdict.final set by a hook that needs the outcome")


# --- event hooks ---------------------------------------------------------------------------------


async def reasoning_pass_through(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, **_REASONING)
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "call_next", "answered the invocation with done, not call_next")
        check(got[-1].call_next.WhichOneof("overrides") is None, "call_next carries overrides")
        check(not customs(got), "emitted without a marker")
        await _events_through(session, [_start(), _delta("hello")], drop=False)
        await session.send(_req("1", outcome=_END))
        done = (await session.expect("1", "done"))[-1].done
        check(done.WhichOneof("result") is None, f"done carries {done.WhichOneof('result')}")
    finally:
        session.cancel()


async def reasoning_short_circuit(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "short-circuit", **_REASONING)
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "done", "did not short-circuit with done")
        check(customs(got) == ["conformance.short_circuit"], f"emitted {customs(got)}")
        emit = next(m.emit for m in got if _arm(m) == "emit")
        check(emit.reply_id in ("", "conformance-reply"), f"emit for reply {emit.reply_id!r}")
        await session.silence(SHORT_SILENCE, "after done")
    finally:
        session.cancel()


async def reasoning_override(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "override", **_REASONING)
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.WhichOneof("overrides") == "reasoning", "no reasoning overrides")
        check(call_next.reasoning.tool_choice == "none", "tool_choice not overridden to none")
    finally:
        session.cancel()


async def reasoning_emit(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "emit", **_REASONING)
    try:
        got = await session.expect("1", "call_next")
        check(customs(got) == ["conformance.pre"], f"before call_next: emitted {customs(got)}")
        await _events_through(session, [_delta("x")], drop=False)
        await session.send(_req("1", outcome=_END))
        got = await session.expect("1", "done")
        check(customs(got) == ["conformance.post"], f"before done: emitted {customs(got)}")
    finally:
        session.cancel()


async def reasoning_drop(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "drop", **_REASONING)
    try:
        await session.expect("1", "call_next")
        await _events_through(session, [_start(), _delta("x")], drop=True)
        await session.send(_req("1", outcome=_END))
        await session.expect("1", "done")
    finally:
        session.cancel()


async def reasoning_state(t: Target, kind: MessageKind) -> None:
    session = await _open(
        t, kind, pb.HOOK_ON_REASONING, "state", state={"count": 4, "kept": "yes"}, **_REASONING
    )
    try:
        got = await session.expect("1", "call_next")
        state = last_state(got)
        check(state is not None, "no mutate with the state before call_next")
        check(state == {"count": 5, "kept": "yes"}, f"state {state}, expected count 5, kept kept")
    finally:
        session.cancel()


async def reasoning_final(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "final", **_REASONING)
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.final, "call_next.final not set")
        await session.silence(SHORT_SILENCE, "after a final call_next")
    finally:
        session.cancel()


def _check_error(done: pb.HookDone, hook: str) -> None:
    check(done.WhichOneof("result") == "error", "done carries no error")
    check(done.error.reason == "CONFORMANCE_ERROR", f"reason {done.error.reason!r}")
    check(done.error.metadata.get("hook") == hook, f"metadata {dict(done.error.metadata)}")


async def reasoning_error(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "error", **_REASONING)
    try:
        _check_error((await session.expect("1", "done"))[-1].done, "on_reasoning")
    finally:
        session.cancel()


async def reasoning_error_after(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "error-after", **_REASONING)
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=_END))
        _check_error((await session.expect("1", "done"))[-1].done, "on_reasoning")
    finally:
        session.cancel()


async def reasoning_downstream_error(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, **_REASONING)
    try:
        await session.expect("1", "call_next")
        error = ev.ReplyError(reason="MODEL_ERROR", message="the model failed", source="model")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(error=error)))
        await session.expect("1", "done")
    finally:
        session.cancel()


async def reply_read_only(t: Target, kind: MessageKind) -> None:
    reply = pb.ReplyArgs()
    session = await _open(t, kind, pb.HOOK_ON_REPLY, "emit", reply=reply)
    try:
        got = await session.expect("1", "call_next")
        check(customs(got) == ["conformance.pre"], f"emitted {customs(got)}")
        for event in (_start(), _delta("a")):
            await session.send(_req("1", item=pb.DownstreamItem(event=event)))
        coalesced = pb.DownstreamItem(event=_delta("b"), more_events=[_delta("c"), _delta("d")])
        await session.send(_req("1", item=coalesced))
        await session.silence(SHORT_SILENCE, "read-only items are never answered")
        await session.send(_req("1", outcome=_END))
        got = await session.expect("1", "done")
        check(customs(got) == ["conformance.post"], f"before done: emitted {customs(got)}")
    finally:
        session.cancel()


async def acting_override(t: Target, kind: MessageKind) -> None:
    args = pb.ActingArgs(tool_call={"id": "c1", "name": "echo", "arguments": '{"text": "x"}'})
    session = await _open(t, kind, pb.HOOK_ON_ACTING, "override", acting=args)
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.WhichOneof("overrides") == "acting", "no acting overrides")
        arguments = json.loads(call_next.acting.arguments or "null")
        check(arguments == {"text": "overridden"}, f"arguments {arguments}")
    finally:
        session.cancel()


# --- awaitable hooks -----------------------------------------------------------------------------


def _model_args() -> dict[str, Any]:
    return {"model_call": pb.ModelCallArgs(model_name="m", tool_choice="auto")}


async def _result_kept(
    t: Target, kind: MessageKind, hook: int, args: Any, arm: str, value: Any
) -> None:
    """Without a marker, `done` answering the outcome keeps the downstream's result."""
    session = await _open(t, kind, hook, **args)
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(**{arm: value})))
        done = (await session.expect("1", "done"))[-1].done
        got = done.WhichOneof("result")
        check(got in (None, arm), f"done carries {got}")
        if got == arm:
            check(getattr(done, arm) == value, f"done changed the {arm}")
    finally:
        session.cancel()


async def model_full(t: Target, kind: MessageKind) -> None:
    response = pb.ModelResponse(message=assistant(kind, "the answer"), stop_reason="stop")
    await _result_kept(t, kind, pb.HOOK_ON_MODEL_CALL, _model_args(), "model_response", response)


async def model_stream(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, **_model_args())
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(stream_start=pb.StreamStart())))
        for text in ("one ", "two"):
            chunk = pb.DownstreamItem(chunk=pb.ModelChunk(text=text))
            await session.send(_req("1", item=chunk))
        await session.silence(SHORT_SILENCE, "stream_start and chunks are never answered")
        await session.send(_req("1", outcome=_END))
        done = (await session.expect("1", "done"))[-1].done
        check(done.WhichOneof("result") is None, "done answering stream_end carries a result")
    finally:
        session.cancel()


async def model_short_circuit(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, "short-circuit", **_model_args())
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "done", "did not short-circuit with done")
        done = got[-1].done
        check(done.WhichOneof("result") == "model_response", "done carries no model response")
        message = done.model_response.message
        check(message.WhichOneof("kind") == kind, f"response is {message.WhichOneof('kind')}")
        check(customs(got) == ["conformance.short_circuit"], f"emitted {customs(got)}")
    finally:
        session.cancel()


async def model_override(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, "model", **_model_args())
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.WhichOneof("overrides") == "model_call", "no model_call overrides")
        check(call_next.model_call.model == "fast", f"model {call_next.model_call.model!r}")
    finally:
        session.cancel()


def _permission_args() -> dict[str, Any]:
    tool = pb.ToolSpec(name="echo", description="echo")
    call = {"id": "c1", "name": "echo", "arguments": "{}"}
    return {"check_permission": pb.CheckPermissionArgs(tool_call=call, tool=tool)}


async def permission_short_circuit(t: Target, kind: MessageKind) -> None:
    session = await _open(
        t, kind, pb.HOOK_ON_CHECK_PERMISSION, "short-circuit", **_permission_args()
    )
    try:
        done = (await session.expect("1", "done", "call_next"))[-1].done
        check(done.permission.behavior == pb.PERMISSION_BEHAVIOR_DENY, "not denied")
        check(done.permission.reason == "short-circuited", f"reason {done.permission.reason!r}")
    finally:
        session.cancel()


async def permission_pass_through(t: Target, kind: MessageKind) -> None:
    decision = pb.PermissionDecision(behavior=pb.PERMISSION_BEHAVIOR_ASK, reason="r")
    hook = pb.HOOK_ON_CHECK_PERMISSION
    await _result_kept(t, kind, hook, _permission_args(), "permission", decision)


async def compress_pre_only(t: Target, kind: MessageKind) -> None:
    args = {"compress_context": pb.CompressContextArgs()}
    session = await _open(t, kind, pb.HOOK_ON_COMPRESS_CONTEXT, "emit", **args)
    try:
        got = await session.expect("1", "call_next")
        check(customs(got) == ["conformance.pre"], f"emitted {customs(got)}")
        await session.silence(SHORT_SILENCE, "a pre_only invocation ends at call_next")
    finally:
        session.cancel()


async def context_forget(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REASONING, "forget", **_REASONING)
    try:
        got = await session.expect("1", "call_next")
        removed = [i for m in got if _arm(m) == "mutate" for i in m.mutate.remove_message_ids]
        replaced = [m for m in got if _arm(m) == "mutate" and m.mutate.HasField("replace_context")]
        if replaced:
            ids = [msg.id for msg in replaced[-1].mutate.replace_context.messages]
            check(ids == ["m2"], f"replaced the context with {ids}, expected [m2]")
        else:
            check(removed == ["m1"], f"removed {removed}, expected [m1]")
    finally:
        session.cancel()


KIND_RULES: dict[str, Rule] = {
    "on_reasoning.pass_through": reasoning_pass_through,
    "on_reasoning.short_circuit": reasoning_short_circuit,
    "on_reasoning.override": reasoning_override,
    "on_reasoning.emit": reasoning_emit,
    "on_reasoning.drop": reasoning_drop,
    "on_reasoning.state": reasoning_state,
    "on_reasoning.final": reasoning_final,
    "on_reasoning.error": reasoning_error,
    "on_reasoning.error_after": reasoning_error_after,
    "on_reasoning.downstream_error": reasoning_downstream_error,
    "on_reply.read_only": reply_read_only,
    "on_acting.override": acting_override,
    "on_model_call.full": model_full,
    "on_model_call.stream": model_stream,
    "on_model_call.short_circuit": model_short_circuit,
    "on_model_call.model": model_override,
    "on_check_permission.short_circuit": permission_short_circuit,
    "on_check_permission.pass_through": permission_pass_through,
    "on_compress_context.pre_only": compress_pre_only,
    "context.forget": context_forget,
}
"""Rules run once per message kind."""
