"""How the sidecar runs one invocation of each kind of hook against a local middleware."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from hookmesh.middleware import ALLOW, OVERRIDES, Middleware
from hookmesh.models import ModelResponse
from hookmesh.remote import _codec as c
from hookmesh.remote._call import HostCall
from hookmesh.remote._sidecar_agent import ModelChoice, ModelRefPb, SidecarAgent, ToolRef
from hookmesh.remote._subscriptions import READ_ONLY
from hookmesh.schema import (
    AgentEvent,
    Resume,
    ToolCall,
    event_from_proto,
    make_assistant,
    message_from_proto,
    message_to_proto,
)
from hookmesh.tools import Tool
from hookmesh.v1 import middleware_pb2 as _mw_pb2

# --- hook runners (sidecar side) -------------------------------------------------------------


def _kwargs(hook: str, invocation: _mw_pb2.HookInvocation, tools: Mapping[str, Tool]) -> Any:
    """The hook's typed kwargs (`ReplyArgs`, `ActingArgs`, ...) decoded from `invocation`."""
    arm = invocation.WhichOneof("kwargs")
    if hook == "on_reply" and arm == "reply":
        inputs = [message_from_proto(m, "reply.inputs") for m in invocation.reply.inputs]
        return {"inputs": inputs, "resume": Resume() if invocation.reply.resume else None}
    if hook == "on_reasoning" and arm == "reasoning":
        return {"tool_choice": invocation.reasoning.tool_choice}
    if hook == "on_acting" and arm == "acting":
        args = invocation.acting
        call = c.tool_call_from_pb(args.tool_call)
        return {
            "tool_call": call,
            "tool": ToolRef(args.tool),
            "arguments": _arguments(call, tools.get(call.name)),
        }
    if hook == "on_model_call" and arm == "model_call":
        args = invocation.model_call
        return {
            "model": ModelRefPb(args.model_name, args.provider_name),
            "messages": [message_from_proto(m, "model_call.messages") for m in args.messages],
            "tools": [c.tool_definition(t) for t in args.tools],
            "tool_choice": args.tool_choice,
        }
    if hook == "on_check_permission" and arm == "check_permission":
        args = invocation.check_permission
        return {"tool_call": c.tool_call_from_pb(args.tool_call), "tool": ToolRef(args.tool)}
    if hook == "on_compress_context":
        return {}
    raise ValueError(f"invocation for {hook or 'an unknown hook'} carries {arm or 'no'} kwargs")


def _arguments(call: ToolCall, own: Tool | None) -> dict[str, Any]:
    """A call's arguments as the agent parsed them (it validated them before the hook): by
    the tool itself when it is one of this middleware's (defaults filled, as in process),
    else as sent."""
    if own is not None:
        return own.parse_arguments(call.arguments)
    parsed = json.loads(call.arguments) if call.arguments.strip() else {}
    if not isinstance(parsed, dict):
        raise ValueError(f"acting.tool_call.arguments of {call.name!r} is not a JSON object")
    return parsed


def _call_next(hook: str, overrides: dict[str, Any], final: bool = False) -> _mw_pb2.CallNext:
    out = _call_next_overrides(hook, overrides)
    out.final = final
    return out


def _call_next_overrides(hook: str, overrides: dict[str, Any]) -> _mw_pb2.CallNext:
    if not overrides:
        return _mw_pb2.CallNext()
    unknown = overrides.keys() - OVERRIDES[hook]
    if unknown:
        takes = ", ".join(sorted(OVERRIDES[hook])) or "none"
        raise TypeError(
            f"next_handler of {hook} cannot override {', '.join(sorted(unknown))} "
            f"(it takes: {takes})"
        )
    if hook == "on_reasoning":
        return _mw_pb2.CallNext(
            reasoning=_mw_pb2.ReasoningOverrides(tool_choice=overrides.get("tool_choice"))
        )
    if hook == "on_model_call":
        out = _mw_pb2.ModelCallOverrides()
        if "tool_choice" in overrides:
            out.tool_choice = overrides["tool_choice"]
        if "messages" in overrides:
            out.messages.messages.extend(message_to_proto(m) for m in overrides["messages"])
        if "tools" in overrides:
            out.tools.SetInParent()
            out.tools.names.extend(t["name"] for t in overrides["tools"])
        if "model" in overrides:
            choice = overrides["model"]
            if not isinstance(choice, ModelChoice):
                raise ValueError(
                    "choose the model with next_handler(model=agent.resolve_model(name))"
                )
            out.model = choice.name
        return _mw_pb2.CallNext(model_call=out)
    return _mw_pb2.CallNext(
        acting=_mw_pb2.ActingOverrides(arguments=c.arguments_json(overrides["arguments"]))
    )


async def _nothing() -> AsyncIterator[AgentEvent]:
    return
    yield


class _Downstream:
    """An event hook's downstream as its sidecar hook sees it; `pass_rest` marks it."""

    def __init__(self) -> None:
        self.items: AsyncIterator[AgentEvent] = _nothing()
        self.passing = False
        """The hook asked for the rest to pass: the next verdict is final."""
        self.ended = False
        """A final verdict went: nothing more is sent for the invocation."""

    def __aiter__(self) -> _Downstream:
        return self

    async def __anext__(self) -> AgentEvent:
        return await self.items.__anext__()

    async def aclose(self) -> None:
        aclose = getattr(self.items, "aclose", None)
        if aclose is not None:
            await aclose()


def pass_rest(stream: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
    """Say that an event hook needs nothing more from its downstream: the rest passes
    unchanged. Iterate the stream on as before (``async for event in pass_rest(stream):
    yield event``); in process nothing changes, but served as a sidecar the item it holds
    (or the next one awaiting a verdict) is answered with ``verdict {final: true}`` (kept
    when re-yielded, dropped when not) and the invocation ends there: the agent passes the
    rest without a round trip and expects no ``done``, so the hook's later emits are not
    sent (docs/remote-protocol.md § Overrides (`call_next`))."""
    if isinstance(stream, _Downstream):
        stream.passing = True
    return stream


async def _event_hook(
    call: HostCall,
    mw: Middleware,
    hook: str,
    mode: str,
    agent: SidecarAgent,
    inv: _mw_pb2.HookInvocation,
) -> None:
    routes = call.routes[hook]
    pending: list[AgentEvent] = []
    """The item awaiting a verdict: dropped unless the hook re-yields it before pulling on."""
    passed: list[AgentEvent] = []
    """The last read-only item: re-yielding it sends nothing."""
    handed: list[tuple[_Downstream, dict[str, Any]]] = []

    def final_verdict(box: _Downstream, drop: bool) -> None:
        call.control(verdict=_mw_pb2.ItemVerdict(drop=drop, final=True))
        box.ended = True
        call.muted = True  # the invocation ended: later emits are not sent

    async def downstream(box: _Downstream, overrides: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        # NOTE(hookmesh): call_next goes when the hook first pulls, so a plain function that
        # hands the stream back untouched can say "final" instead (one round trip).
        call.control(call_next=_call_next(hook, overrides))
        while not box.ended:
            if pending:
                pending.clear()
                if box.passing:
                    final_verdict(box, drop=True)
                    return
                call.control(verdict=_mw_pb2.ItemVerdict(drop=True))
            passed.clear()
            request = await call.receive()
            arm = request.WhichOneof("message")
            if arm == "item":
                assert call.sync is not None
                event = event_from_proto(request.item.event)
                if routes.route(event.type) != READ_ONLY:
                    call.sync.take(request.item.state)
                    if box.passing:
                        final_verdict(box, drop=False)
                        yield event
                        return
                    pending.append(event)
                    yield event
                    continue
                passed.append(event)
                yield event
                for more in request.item.more_events:
                    passed.clear()
                    event = event_from_proto(more)
                    passed.append(event)
                    yield event
            elif arm == "outcome":
                call.take_outcome(request.outcome)
                return

    def next_handler(**overrides: Any) -> AsyncIterator[AgentEvent]:
        if mode == "pre_only":
            call.control(call_next=_call_next(hook, overrides))
            # The agent ends a pre_only invocation at call_next: nothing more will arrive.
            call.muted = True
            return _nothing()
        box = _Downstream()
        box.items = downstream(box, overrides)
        handed.append((box, overrides))
        return box

    result = getattr(mw, hook)(agent, _kwargs(hook, inv, call.tools), next_handler)
    if handed and result is handed[-1][0]:
        call.control(call_next=_call_next(hook, handed[-1][1], final=True))
        return
    async for out in result:
        if pending and out is pending[0]:
            pending.clear()
            if handed and handed[-1][0].passing:
                final_verdict(handed[-1][0], drop=False)
            else:
                call.control(verdict=_mw_pb2.ItemVerdict(drop=False))
        elif not (passed and out is passed[0]):
            call.emit(out)
    if not (handed and handed[-1][0].ended):
        call.control(done=_mw_pb2.HookDone())


async def _run_downstream(
    call: HostCall, mode: str, call_next: _mw_pb2.CallNext
) -> _mw_pb2.DownstreamOutcome | None:
    """Hand the invocation downstream and wait for its outcome (state and context taken in,
    a downstream error raised); None under pre_only, where the agent ends the invocation at
    call_next and the sidecar never learns the outcome."""
    call.control(call_next=call_next)
    if mode == "pre_only":
        call.muted = True
        return None
    request = await call.receive()
    call.take_outcome(request.outcome)
    return request.outcome


async def _model_hook(
    call: HostCall,
    mw: Middleware,
    hook: str,
    mode: str,
    agent: SidecarAgent,
    inv: _mw_pb2.HookInvocation,
) -> None:
    async def chunks() -> AsyncIterator[Any]:
        while True:
            request = await call.receive()
            if request.WhichOneof("message") == "item":
                yield c.chunk_from_pb(request.item.chunk)
            else:
                call.take_outcome(request.outcome)
                return

    async def next_handler(**overrides: Any) -> Any:
        outcome = await _run_downstream(call, mode, _call_next(hook, overrides))
        if outcome is None:
            return ModelResponse(message=make_assistant(agent.kind, ""))
        if outcome.WhichOneof("result") == "model_response":
            return c.response_from_pb(outcome.model_response)
        return chunks()

    result = await mw.on_model_call(agent, _kwargs(hook, inv, call.tools), next_handler)
    if isinstance(result, ModelResponse):
        call.control(done=_mw_pb2.HookDone(model_response=c.response_to_pb(result)))
        return
    async for _ in result:
        pass
    call.control(done=_mw_pb2.HookDone())


async def _permission_hook(
    call: HostCall,
    mw: Middleware,
    hook: str,
    mode: str,
    agent: SidecarAgent,
    inv: _mw_pb2.HookInvocation,
) -> None:
    async def next_handler(**overrides: Any) -> Any:
        outcome = await _run_downstream(call, mode, _call_next(hook, overrides))
        return ALLOW if outcome is None else c.decision_from_pb(outcome.permission)

    decision = await mw.on_check_permission(agent, _kwargs(hook, inv, call.tools), next_handler)
    call.control(done=_mw_pb2.HookDone(permission=c.decision_to_pb(decision)))


async def _compress_hook(
    call: HostCall,
    mw: Middleware,
    hook: str,
    mode: str,
    agent: SidecarAgent,
    inv: _mw_pb2.HookInvocation,
) -> None:
    async def next_handler(**overrides: Any) -> None:
        await _run_downstream(call, mode, _call_next(hook, overrides))

    await mw.on_compress_context(agent, {}, next_handler)
    call.control(done=_mw_pb2.HookDone())


RUNNERS = {
    "on_reply": _event_hook,
    "on_reasoning": _event_hook,
    "on_acting": _event_hook,
    "on_model_call": _model_hook,
    "on_check_permission": _permission_hook,
    "on_compress_context": _compress_hook,
}
