"""The conformance rules: each drives the sidecar at the message level and checks its answers
against the ConformanceMiddleware spec (docs/remote-protocol.md)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hookmesh.conformance._session import (
    RuleFailure,
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
OVERRIDDEN = {"text": "overridden"}


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


def _delta_x() -> ev.AgentEvent:
    return _delta("x")


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


@dataclass(frozen=True)
class EventHook:
    """An event hook the conformance middleware serves with verdicts, and its override."""

    name: str
    hook: int
    args: dict[str, Any]
    items: tuple[Callable[[], ev.AgentEvent], ...]


def _tool_result(text: str) -> ev.AgentEvent:
    return ev.AgentEvent(
        reply_id="conformance-reply",
        tool_result_delta=ev.ToolResultDeltaEvent(call_id="c1", text=text),
    )


REASONING = EventHook("on_reasoning", pb.HOOK_ON_REASONING, _REASONING, (_start, _delta_x))
ACTING = EventHook(
    "on_acting",
    pb.HOOK_ON_ACTING,
    {"acting": pb.ActingArgs(tool_call={"id": "c1", "name": "echo", "arguments": '{"text": "x"}'})},
    (lambda: _tool_result("x"),),
)


REPLY = EventHook(
    "on_reply", pb.HOOK_ON_REPLY, {"reply": pb.ReplyArgs()}, (_start, lambda: _delta("a"))
)
"""Its items are read-only: never answered."""


def _check_override(h: EventHook, call_next: pb.CallNext) -> None:
    if h.hook == pb.HOOK_ON_ACTING:
        check(call_next.WhichOneof("overrides") == "acting", "no acting overrides")
        arguments = json.loads(call_next.acting.arguments or "null")
        check(arguments == OVERRIDDEN, f"arguments {arguments}, expected {OVERRIDDEN}")
    else:
        check(call_next.WhichOneof("overrides") == "reasoning", "no reasoning overrides")
        check(call_next.reasoning.tool_choice == "none", "tool_choice not overridden to none")


async def pass_through(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, **h.args)
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "call_next", "answered the invocation with done, not call_next")
        check(got[-1].call_next.WhichOneof("overrides") is None, "call_next carries overrides")
        check(not customs(got), "emitted without a marker")
        await _events_through(session, [item() for item in h.items], drop=False)
        await session.send(_req("1", outcome=_END))
        done = (await session.expect("1", "done"))[-1].done
        check(done.WhichOneof("result") is None, f"done carries {done.WhichOneof('result')}")
    finally:
        session.cancel()


async def short_circuit(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "short-circuit", **h.args)
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "done", "did not short-circuit with done")
        check(customs(got) == ["conformance.short_circuit"], f"emitted {customs(got)}")
        await session.silence(SHORT_SILENCE, "after done")
    finally:
        session.cancel()


async def override(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "override", **h.args)
    try:
        _check_override(h, (await session.expect("1", "call_next"))[-1].call_next)
    finally:
        session.cancel()


async def emit(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "emit", **h.args)
    try:
        got = await session.expect("1", "call_next")
        check(customs(got) == ["conformance.pre"], f"before call_next: emitted {customs(got)}")
        await _events_through(session, [h.items[-1]()], drop=False)
        await session.send(_req("1", outcome=_END))
        got = await session.expect("1", "done")
        check(customs(got) == ["conformance.post"], f"before done: emitted {customs(got)}")
    finally:
        session.cancel()


async def drop(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "drop", **h.args)
    try:
        await session.expect("1", "call_next")
        await _events_through(session, [item() for item in h.items], drop=True)
        await session.send(_req("1", outcome=_END))
        await session.expect("1", "done")
    finally:
        session.cancel()


async def state(t: Target, kind: MessageKind, h: EventHook) -> None:
    """`count` + 1, a missing count reading as 0 (so it becomes 1); other keys kept."""
    for iid, before, after in (
        ("1", {"count": 4, "kept": "yes"}, {"count": 5, "kept": "yes"}),
        ("2", {"kept": "yes"}, {"count": 1, "kept": "yes"}),
    ):
        session = t.session()
        try:
            await session.send(invocation(iid, h.hook, kind, "state", state=before, **h.args))
            got = await session.expect(iid, "call_next")
            found = last_state(got)
            check(found is not None, "no mutate with the state before call_next")
            check(found == after, f"state {found} from {before}, expected {after}")
        finally:
            session.cancel()


async def final(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "final", **h.args)
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.final, "call_next.final not set")
        await session.silence(SHORT_SILENCE, "after a final call_next")
    finally:
        session.cancel()


async def final_verdict(t: Target, kind: MessageKind, h: EventHook) -> None:
    """`verdict {final: true}` at the first item: kept, and the invocation ends there (the
    agent sends no more items and no outcome and expects no `done`)."""
    session = await _open(t, kind, h.hook, "final-verdict", **h.args)
    try:
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "call_next", "answered the invocation with done, not call_next")
        check(not got[-1].call_next.final, "call_next.final set (the final goes on the verdict)")
        await session.send(_req("1", item=_item(h.items[0]())))
        got = await session.expect("1", "verdict", "done")
        check(_arm(got[-1]) == "verdict", "answered the first item with done, not a verdict")
        verdict = got[-1].verdict
        check(verdict.final, "verdict.final not set")
        check(not verdict.drop, "the final verdict dropped the item")
        await session.silence(SHORT_SILENCE, "after a final verdict")
    finally:
        session.cancel()


async def stop(t: Target, kind: MessageKind, h: EventHook) -> None:
    """A done at the first item (in place of its verdict; unasked for a read-only one) ends
    the invocation: what the agent sent before it saw the done gets no answer."""
    session = await _open(t, kind, h.hook, "stop", **h.args)
    try:
        await session.expect("1", "call_next")
        first, *rest = [item() for item in h.items]
        await session.send(_req("1", item=_item(first)))
        got = await session.expect("1", "done", "verdict")
        check(_arm(got[-1]) == "done", "answered the first item with a verdict, not done")
        check(customs(got) == ["conformance.stopped"], f"before done: emitted {customs(got)}")
        check(got[-1].done.WhichOneof("result") is None, "the stopping done carries a result")
        for event in rest:
            await session.send(_req("1", item=_item(event)))
        await session.send(_req("1", outcome=_END))
        await session.silence(SHORT_SILENCE, _ENDED_IGNORES)
    finally:
        session.cancel()


_ENDED_IGNORES = "what the agent sent before it saw the done is ignored"
STOPPING_HOOKS = ("on_reply", "on_reasoning", "on_acting", "on_model_call")
"""The hooks with a `stop` rule: a done while the downstream runs."""


def _check_error(done: pb.HookDone, hook: str) -> None:
    check(done.WhichOneof("result") == "error", "done carries no error")
    check(done.error.reason == "CONFORMANCE_ERROR", f"reason {done.error.reason!r}")
    check(done.error.metadata.get("hook") == hook, f"metadata {dict(done.error.metadata)}")


async def error(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "error", **h.args)
    try:
        _check_error((await session.expect("1", "done"))[-1].done, h.name)
    finally:
        session.cancel()


async def error_after(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, "error-after", **h.args)
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=_END))
        _check_error((await session.expect("1", "done"))[-1].done, h.name)
    finally:
        session.cancel()


async def downstream_error(t: Target, kind: MessageKind, h: EventHook) -> None:
    session = await _open(t, kind, h.hook, **h.args)
    try:
        await session.expect("1", "call_next")
        failure = ev.ReplyError(reason="MODEL_ERROR", message="the model failed", source="model")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(error=failure)))
        await session.expect("1", "done")
    finally:
        session.cancel()


async def retry(t: Target, kind: MessageKind, h: EventHook) -> None:
    """After an outcome carrying an error, a second call_next runs the downstream again."""
    session = await _open(t, kind, h.hook, "retry", **h.args)
    try:
        await session.expect("1", "call_next")
        failure = ev.ReplyError(reason="TOOL_ERROR", message="the first run failed", source="x")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(error=failure)))
        got = await session.expect("1", "call_next", "done")
        check(_arm(got[-1]) == "call_next", "answered the failed outcome with done, no retry")
        await session.send(_req("1", outcome=_END))
        done = (await session.expect("1", "done"))[-1].done
        check(done.WhichOneof("result") is None, f"done carries {done.WhichOneof('result')}")
    finally:
        session.cancel()


async def reply_read_only(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_REPLY, "emit", **REPLY.args)
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
    """stream_start and chunks get no answer; stream_end gets a plain done. A plain done
    (or done{error}) unasked once the stream started is allowed: it ends the invocation."""
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, **_model_args())
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(stream_start=pb.StreamStart())))
        for text in ("one ", "two"):
            chunk = pb.DownstreamItem(chunk=pb.ModelChunk(text=text))
            await session.send(_req("1", item=chunk))
        try:
            await session.silence(SHORT_SILENCE, "stream_start and chunks are never answered")
        except RuleFailure:
            early = session.last
            if early is None or _arm(early) != "done":
                raise
            check(
                early.done.WhichOneof("result") in (None, "error"),
                "done after stream_start carries a model_response (only an error or nothing)",
            )
            return
        await session.send(_req("1", outcome=_END))
        done = (await session.expect("1", "done"))[-1].done
        check(done.WhichOneof("result") is None, "done answering stream_end carries a result")
    finally:
        session.cancel()


async def model_stop(t: Target, kind: MessageKind) -> None:
    """A plain done at the first chunk, unasked, ends the stream; the chunks and the
    stream_end sent before the agent saw it get no answer."""
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, "stop", **_model_args())
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=pb.DownstreamOutcome(stream_start=pb.StreamStart())))
        await session.send(_req("1", item=pb.DownstreamItem(chunk=pb.ModelChunk(text="one "))))
        done = (await session.expect("1", "done"))[-1].done
        result = done.WhichOneof("result")
        check(result is None, f"done after stream_start carries {result} (only a plain done)")
        await session.send(_req("1", item=pb.DownstreamItem(chunk=pb.ModelChunk(text="two"))))
        await session.send(_req("1", outcome=_END))
        await session.silence(SHORT_SILENCE, _ENDED_IGNORES)
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


async def model_tool_choice(t: Target, kind: MessageKind) -> None:
    session = await _open(t, kind, pb.HOOK_ON_MODEL_CALL, "override", **_model_args())
    try:
        call_next = (await session.expect("1", "call_next"))[-1].call_next
        check(call_next.WhichOneof("overrides") == "model_call", "no model_call overrides")
        overrides = call_next.model_call
        check(overrides.tool_choice == "none", f"tool_choice {overrides.tool_choice!r}")
        check(not overrides.HasField("model"), f"model {overrides.model!r} not asked for")
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
        got = await session.expect("1", "done", "call_next")
        check(_arm(got[-1]) == "done", "did not short-circuit with done")
        check(customs(got) == ["conformance.short_circuit"], f"emitted {customs(got)}")
        done = got[-1].done
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


MODEL = EventHook("on_model_call", pb.HOOK_ON_MODEL_CALL, _model_args(), ())
PERMISSION = EventHook("on_check_permission", pb.HOOK_ON_CHECK_PERMISSION, _permission_args(), ())
COMPRESS = EventHook(
    "on_compress_context",
    pb.HOOK_ON_COMPRESS_CONTEXT,
    {"compress_context": pb.CompressContextArgs()},
    (),
)
"""The awaitable hooks, for the marker rules they share with the event hooks (`state`,
`error`); they have no verdict items."""


def _result(hook: str, kind: MessageKind) -> pb.DownstreamOutcome:
    """The downstream's result of an awaitable hook: a full response, or allow."""
    if hook == "on_model_call":
        return pb.DownstreamOutcome(model_response=pb.ModelResponse(message=assistant(kind, "a")))
    return pb.DownstreamOutcome(
        permission=pb.PermissionDecision(behavior=pb.PERMISSION_BEHAVIOR_ALLOW)
    )


async def awaitable_error_after(t: Target, kind: MessageKind, h: EventHook) -> None:
    """`call_next`, then the marker's error in answer to the downstream's result."""
    session = await _open(t, kind, h.hook, "error-after", **h.args)
    try:
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=_result(h.name, kind)))
        _check_error((await session.expect("1", "done"))[-1].done, h.name)
    finally:
        session.cancel()


async def awaitable_emit(t: Target, kind: MessageKind, h: EventHook) -> None:
    """`conformance.pre` before call_next, `conformance.post` before the done answering the
    downstream's result (which it keeps): emits are allowed on the awaitable hooks too."""
    session = await _open(t, kind, h.hook, "emit", **h.args)
    try:
        got = await session.expect("1", "call_next")
        check(customs(got) == ["conformance.pre"], f"before call_next: emitted {customs(got)}")
        outcome = _result(h.name, kind)
        await session.send(_req("1", outcome=outcome))
        got = await session.expect("1", "done")
        check(customs(got) == ["conformance.post"], f"before done: emitted {customs(got)}")
        done = got[-1].done
        result = done.WhichOneof("result")
        arm = outcome.WhichOneof("result")
        check(result in (None, arm), f"done carries {result}")
        if result == arm:
            check(getattr(done, arm) == getattr(outcome, arm), f"done changed the {arm}")
    finally:
        session.cancel()


def _on(h: EventHook, rule: Callable[[Target, MessageKind, EventHook], Awaitable[None]]) -> Rule:
    return lambda t, kind: rule(t, kind, h)


KIND_RULES: dict[str, Rule] = {
    **{
        f"{h.name}.{name}": _on(h, rule)
        for h in (REASONING, ACTING)
        for name, rule in (
            ("pass_through", pass_through),
            ("short_circuit", short_circuit),
            ("override", override),
            ("emit", emit),
            ("drop", drop),
            ("state", state),
            ("final", final),
            ("final_verdict", final_verdict),
            ("error", error),
            ("error_after", error_after),
            ("downstream_error", downstream_error),
            ("retry", retry),
            ("stop", stop),
        )
    },
    "on_reply.read_only": reply_read_only,
    **{
        f"on_reply.{name}": _on(REPLY, rule)
        for name, rule in (
            ("short_circuit", short_circuit),
            ("state", state),
            ("error", error),
            ("error_after", error_after),
            ("stop", stop),
        )
    },
    **{
        f"{h.name}.{name}": _on(h, rule)
        for h in (MODEL, PERMISSION, COMPRESS)
        for name, rule in (("state", state), ("error", error))
    },
    **{f"{h.name}.error_after": _on(h, awaitable_error_after) for h in (MODEL, PERMISSION)},
    **{f"{h.name}.emit": _on(h, awaitable_emit) for h in (MODEL, PERMISSION)},
    "on_model_call.full": model_full,
    "on_model_call.stream": model_stream,
    "on_model_call.stop": model_stop,
    "on_model_call.short_circuit": model_short_circuit,
    "on_model_call.override": model_tool_choice,
    "on_model_call.model": model_override,
    "on_check_permission.short_circuit": permission_short_circuit,
    "on_check_permission.pass_through": permission_pass_through,
    "on_compress_context.pre_only": compress_pre_only,
    "context.forget": context_forget,
}
"""Rules run once per message kind."""
