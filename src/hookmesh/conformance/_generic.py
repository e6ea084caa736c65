"""`hookmesh conformance --generic`: the protocol rules every sidecar obeys, whatever its
middleware does, checked from its own Describe (ids, answering only what it subscribed to,
nothing after cancel or done, the close, deadlines, a consistent description)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from hookmesh.conformance._rules import SHORT_SILENCE, Target, _req
from hookmesh.conformance._session import RuleFailure, Session, assistant, check, invocation
from hookmesh.conformance._stream_rules import CANCEL_SILENCE, hook_name
from hookmesh.middleware import check_subscriptions
from hookmesh.schema import make_text, message_to_proto
from hookmesh.v1 import event_pb2 as ev
from hookmesh.v1 import middleware_pb2 as pb

_UNARY = (pb.HOOK_ON_SYSTEM_PROMPT, pb.HOOK_AFTER_AGENT)
_SAMPLE_EVENT: dict[int, str] = {
    pb.HOOK_ON_REPLY: "text_block_delta",
    pb.HOOK_ON_REASONING: "text_block_delta",
    pb.HOOK_ON_ACTING: "tool_result_delta",
}


_ENDING = ("emit", "mutate", "done")
"""What may start an unasked done: its emits and mutations, or the done itself."""
_OBSERVED = "observe mode: the sidecar sends nothing back, no emit, mutate or done"


def _kwargs(hook: int) -> dict[str, Any]:
    call = {"id": "c1", "name": "some_tool", "arguments": "{}"}
    kwargs: dict[int, dict[str, Any]] = {
        pb.HOOK_ON_REPLY: {"reply": pb.ReplyArgs()},
        pb.HOOK_ON_REASONING: {"reasoning": pb.ReasoningArgs(tool_choice="auto")},
        pb.HOOK_ON_MODEL_CALL: {"model_call": pb.ModelCallArgs(model_name="m")},
        pb.HOOK_ON_ACTING: {"acting": pb.ActingArgs(tool_call=call)},
        pb.HOOK_ON_CHECK_PERMISSION: {
            "check_permission": pb.CheckPermissionArgs(
                tool_call=call, tool=pb.ToolSpec(name="some_tool")
            )
        },
        pb.HOOK_ON_COMPRESS_CONTEXT: {"compress_context": pb.CompressContextArgs()},
    }
    return kwargs[hook]


def _outcome(hook: int) -> pb.DownstreamOutcome:
    if hook == pb.HOOK_ON_MODEL_CALL:
        response = pb.ModelResponse(message=assistant("flat", "an answer"), stop_reason="stop")
        return pb.DownstreamOutcome(model_response=response)
    if hook == pb.HOOK_ON_CHECK_PERMISSION:
        allow = pb.PermissionDecision(behavior=pb.PERMISSION_BEHAVIOR_ALLOW)
        return pb.DownstreamOutcome(permission=allow)
    return pb.DownstreamOutcome(stream_end=pb.StreamEnd())


def _item(hook: int, names: list[str]) -> pb.DownstreamItem | None:
    """A downstream item the hook subscribed to by `names`, or None."""
    if not names:
        return None
    if hook == pb.HOOK_ON_MODEL_CALL:
        return pb.DownstreamItem(chunk=pb.ModelChunk(text="a chunk"))
    name = _SAMPLE_EVENT[hook] if "*" in names else sorted(names)[0]
    return pb.DownstreamItem(event=ev.AgentEvent(reply_id="conformance-reply", **{name: {}}))


class Generic:
    """The rules for one described sidecar."""

    def __init__(self, t: Target, described: pb.DescribeResponse) -> None:
        self.t = t
        self.d = described
        self.onion = [h for h in described.hooks if h.hook not in _UNARY]

    def invocation(self, iid: str, spec: pb.HookSpec) -> pb.InterceptRequest:
        request = invocation(iid, spec.hook, "flat", timeout=self.t.timeout, **_kwargs(spec.hook))
        if not self.d.needs_context:
            del request.invocation.context[:]
        return request

    async def first_answer(self, session: Session, iid: str, spec: pb.HookSpec) -> str:
        """Send the invocation; its answer's arm (call_next or done), checked for the hook."""
        await session.send(self.invocation(iid, spec))
        if spec.mode == pb.HOOK_MODE_OBSERVE:
            return ""
        last = (await session.expect(iid, "call_next", "done"))[-1]
        arm = last.WhichOneof("message") or ""
        if arm == "done" and spec.hook in (pb.HOOK_ON_MODEL_CALL, pb.HOOK_ON_CHECK_PERMISSION):
            result = last.done.WhichOneof("result")
            check(result is not None, f"{hook_name(spec.hook)}: a short-circuit without a result")
        if arm == "call_next" and last.call_next.final:
            return "final"
        return arm

    def intercepting(self) -> pb.HookSpec | None:
        for spec in self.onion:
            if spec.mode in (pb.HOOK_MODE_UNSPECIFIED, pb.HOOK_MODE_INTERCEPT):
                return spec
        return None

    async def describe(self) -> None:
        d = self.d
        check(d.protocol_version == 1, f"protocol_version {d.protocol_version}, expected 1")
        check(bool(d.middleware_key), "no middleware_key")
        check(bool(d.hooks), "no hooks")
        seen: set[int] = set()
        for h in d.hooks:
            check(h.hook in pb.Hook.values() and h.hook != 0, f"unknown hook {h.hook}")
            name = hook_name(h.hook)
            check(h.hook not in seen, f"{name}: described twice")
            seen.add(h.hook)
            check(h.mode in pb.HookMode.values(), f"{name}: unknown mode {h.mode}")
            try:
                check_subscriptions(name, h.subscriptions, h.read_only_subscriptions)
            except ValueError as exc:
                raise RuleFailure(str(exc)) from None
        tools = [tool.name for tool in d.tools]
        check(all(tools), "a tool without a name")
        check(len(set(tools)) == len(tools), f"tools named twice: {tools}")
        check(d.max_message_bytes >= 0, f"max_message_bytes {d.max_message_bytes}")

    async def answers(self, spec: pb.HookSpec) -> None:
        """One invocation through: answers where the mode asks, silence where it does not."""
        session = self.t.session()
        try:
            arm = await self.first_answer(session, "1", spec)
            if arm in ("done", "final") or spec.mode == pb.HOOK_MODE_PRE_ONLY:
                await session.silence(SHORT_SILENCE, f"the invocation ended at {arm}")
                return
            if spec.mode == pb.HOOK_MODE_OBSERVE:
                await self._observed(session, spec)
            elif not await self._items(session, spec):
                await session.send(_req("1", outcome=_outcome(spec.hook)))
                await session.expect("1", "done")
                await session.silence(SHORT_SILENCE, "after done")
        finally:
            session.cancel()

    async def _observed(self, session: Session, spec: pb.HookSpec) -> None:
        await session.silence(SHORT_SILENCE, _OBSERVED)
        for names in (spec.subscriptions, spec.read_only_subscriptions):
            item = _item(spec.hook, list(names))
            if item is not None:
                await session.send(_req("1", item=item))
                await session.silence(SHORT_SILENCE, _OBSERVED)
        await session.send(_req("1", outcome=_outcome(spec.hook)))
        await session.silence(SHORT_SILENCE, _OBSERVED)

    async def _items(self, session: Session, spec: pb.HookSpec) -> bool:
        """A subscribed and a read-only item through; whether the sidecar ended the
        invocation meanwhile (a done or a final verdict)."""
        item = _item(spec.hook, list(spec.subscriptions))
        if item is not None:
            await session.send(_req("1", item=item))
            if item.HasField("chunk"):
                if await self._unanswered(session, spec, "an item that is never answered"):
                    return True
            else:
                answer = (await session.expect("1", "verdict", "done"))[-1]
                if answer.HasField("done") or answer.verdict.final:
                    # A final verdict ends the invocation as done does: no outcome follows.
                    await session.silence(SHORT_SILENCE, "the invocation ended at its verdict")
                    return True
        read_only = _item(spec.hook, list(spec.read_only_subscriptions))
        if read_only is None:
            return False
        await session.send(_req("1", item=read_only))
        return await self._unanswered(session, spec, "read-only items are never answered")

    async def _unanswered(self, session: Session, spec: pb.HookSpec, what: str) -> bool:
        """Silence, or a done the sidecar sends unasked (after any emits and mutations): it
        may end the invocation while the downstream runs; the outcome the agent sent before
        it saw the done then gets no answer. Whether it ended the invocation."""
        try:
            await session.silence(SHORT_SILENCE, what)
            return False
        except RuleFailure as failure:
            early = session.last
            arm = early.WhichOneof("message") if early is not None else None
            unasked = early is not None and early.invocation_id == "1"
            if not (unasked and arm in _ENDING and str(failure).startswith("expected silence")):
                raise
        if arm != "done":
            await session.expect("1", "done")
        await session.send(_req("1", outcome=_outcome(spec.hook)))
        await session.silence(SHORT_SILENCE, "what the agent sent before it saw the done")
        return True

    async def cancel(self) -> None:
        spec = self.intercepting()
        if spec is None:
            return
        session = self.t.session()
        try:
            if await self.first_answer(session, "1", spec) == "call_next":
                await session.send(_req("1", cancel=pb.CancelInvocation()))
                await session.send(_req("1", outcome=_outcome(spec.hook)))
                await session.silence(CANCEL_SILENCE, "a cancelled invocation gets no answer")
        finally:
            session.cancel()

    async def interleaved(self) -> None:
        spec = self.intercepting()
        if spec is None:
            return
        session = self.t.session()
        try:
            await session.send(self.invocation("a", spec))
            await session.send(self.invocation("b", spec))
            ended: set[str] = set()
            while ended != {"a", "b"}:
                message = await session.next("call_next or done for a and b")
                iid = message.invocation_id
                check(iid in ("a", "b"), f"an answer for invocation {iid!r}, never sent")
                if message.WhichOneof("message") in ("call_next", "done"):
                    check(iid not in ended, f"{iid} answered twice")
                    ended.add(iid)
        finally:
            session.cancel()

    async def ids_restart_per_stream(self) -> None:
        spec = self.intercepting()
        if spec is None:
            return
        first, second = self.t.session(), self.t.session()
        try:
            await self.first_answer(first, "1", spec)
            try:
                await self.first_answer(second, "1", spec)
            except RuleFailure:
                check(
                    first.inbox.empty(),
                    "the answer to the second stream's invocation 1 came on the first stream: "
                    "invocation ids belong to their stream",
                )
                raise
        finally:
            first.cancel()
            second.cancel()

    async def unknown_ignored(self) -> None:
        session = self.t.session()
        try:
            await session.send(_req("ghost", item=pb.DownstreamItem()))
            await session.send(_req("ghost", outcome=pb.DownstreamOutcome()))
            await session.silence(SHORT_SILENCE, "items and outcomes of no invocation")
        finally:
            session.cancel()

    async def clean_close(self) -> None:
        session = self.t.session()
        try:
            spec = self.intercepting()
            if spec is not None:
                await self.first_answer(session, "1", spec)
            code = await session.close()
            check(code == grpc.StatusCode.OK, f"closing the requests ended the stream {code.name}")
        finally:
            session.cancel()

    async def unary(self) -> None:
        hooks = {h.hook for h in self.d.hooks}
        calls: list[tuple[str, Callable[..., Any], Any]] = []
        if pb.HOOK_ON_SYSTEM_PROMPT in hooks:
            request = pb.TransformSystemPromptRequest(prompt="base", reply_id="r")
            calls.append(("TransformSystemPrompt", self.t.stub.TransformSystemPrompt, request))
        if pb.HOOK_AFTER_AGENT in hooks:
            final = message_to_proto(make_text("flat", "assistant", "the answer"))
            request = pb.AfterAgentRequest(
                reply_id="r", kind=pb.MESSAGE_KIND_FLAT, final_message=final
            )
            calls.append(("AfterAgent", self.t.stub.AfterAgent, request))
        for name, method, request in calls:
            try:
                await method(request, timeout=self.t.timeout, metadata=self.t.metadata)
            except grpc.aio.AioRpcError as exc:
                check(
                    exc.code() == grpc.StatusCode.ABORTED,
                    f"{name} failed with {exc.code().name}: only ABORTED is the middleware's "
                    "own error",
                )

    async def unknown_tool(self) -> None:
        request = pb.CallToolRequest(name="no_such_tool_here", arguments="{}", call_id="c1")
        try:
            stream = self.t.stub.CallTool(request, timeout=self.t.timeout, metadata=self.t.metadata)
            [piece async for piece in stream]
        except grpc.aio.AioRpcError as exc:
            check(exc.code() == grpc.StatusCode.NOT_FOUND, f"unknown tool: {exc.code().name}")
        else:
            check(False, "an unknown tool did not fail with NOT_FOUND")

    def rules(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        out: list[tuple[str, Callable[[], Awaitable[None]]]] = [("generic.describe", self.describe)]
        for spec in self.onion:
            out.append((f"generic.{hook_name(spec.hook)}.answers", _bind(self.answers, spec)))
        out += [
            ("generic.stream.cancel", self.cancel),
            ("generic.stream.interleaved_invocations", self.interleaved),
            ("generic.stream.ids_restart_per_stream", self.ids_restart_per_stream),
            ("generic.stream.unknown_invocations_ignored", self.unknown_ignored),
            ("generic.stream.clean_close", self.clean_close),
            ("generic.unary", self.unary),
        ]
        if self.d.tools:
            out.append(("generic.call_tool.unknown", self.unknown_tool))
        return out


def _bind(rule: Callable[[pb.HookSpec], Awaitable[None]], spec: pb.HookSpec) -> Any:
    return lambda: rule(spec)
