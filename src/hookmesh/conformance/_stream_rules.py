"""Conformance rules about the stream and the unary RPCs: description, deadlines, cancels,
multiplexing, reconnects, clean close, prompt, after_agent, tools, the token."""

from __future__ import annotations

import json
import uuid

import grpc

from hookmesh.conformance._rules import _END, _REASONING, SHORT_SILENCE, Target, _req
from hookmesh.conformance._session import RuleFailure, check, invocation, last_state, struct
from hookmesh.schema import make_text, message_to_proto
from hookmesh.v1 import content_pb2
from hookmesh.v1 import middleware_pb2 as pb

CANCEL_SILENCE = 1.5
"""Seconds a cancelled invocation must stay unanswered (a late answer is still an answer)."""
_EXPECTED_HOOKS = {
    pb.HOOK_ON_REPLY: (pb.HOOK_MODE_INTERCEPT, [], ["*"]),
    pb.HOOK_ON_REASONING: (pb.HOOK_MODE_INTERCEPT, ["*"], []),
    pb.HOOK_ON_MODEL_CALL: (pb.HOOK_MODE_INTERCEPT, ["chunk"], []),
    pb.HOOK_ON_ACTING: (pb.HOOK_MODE_INTERCEPT, ["*"], []),
    pb.HOOK_ON_CHECK_PERMISSION: (pb.HOOK_MODE_INTERCEPT, [], []),
    pb.HOOK_ON_COMPRESS_CONTEXT: (pb.HOOK_MODE_PRE_ONLY, [], []),
    pb.HOOK_ON_SYSTEM_PROMPT: (pb.HOOK_MODE_INTERCEPT, [], []),
    pb.HOOK_AFTER_AGENT: (pb.HOOK_MODE_INTERCEPT, [], []),
}


def hook_name(hook: int) -> str:
    """``on_reply`` for HOOK_ON_REPLY (``after_agent`` for HOOK_AFTER_AGENT)."""
    return pb.Hook.Name(hook).removeprefix("HOOK_").lower()  # type: ignore[arg-type]


def _mode(mode: int) -> str:
    return pb.HookMode.Name(mode or pb.HOOK_MODE_INTERCEPT).removeprefix("HOOK_MODE_")  # type: ignore[arg-type]


def hook_mismatches(d: pb.DescribeResponse) -> list[str]:
    """How the described hooks differ from the conformance middleware's, hook by hook."""
    out: list[str] = []
    seen: set[int] = set()
    for h in d.hooks:
        name = hook_name(h.hook) if h.hook in pb.Hook.values() else f"hook {h.hook}"
        if h.hook in seen:
            out.append(f"{name}: described twice")
        seen.add(h.hook)
        if h.hook not in _EXPECTED_HOOKS:
            out.append(f"{name}: not a hook of the conformance middleware")
            continue
        mode, subs, read_only = _EXPECTED_HOOKS[h.hook]
        if (h.mode or pb.HOOK_MODE_INTERCEPT) != mode:
            out.append(f"{name}: mode {_mode(h.mode)}, expected {_mode(mode)}")
        if sorted(h.subscriptions) != subs:
            out.append(f"{name}: subscriptions {sorted(h.subscriptions)}, expected {subs}")
        if sorted(h.read_only_subscriptions) != read_only:
            got = sorted(h.read_only_subscriptions)
            out.append(f"{name}: read_only_subscriptions {got}, expected {read_only}")
    out.extend(f"{hook_name(h)}: missing" for h in _EXPECTED_HOOKS if h not in seen)
    return out


async def describe(t: Target) -> None:
    d = await t.stub.Describe(
        pb.DescribeRequest(protocol_version=1), timeout=t.timeout, metadata=t.metadata
    )
    check(d.protocol_version == 1, f"protocol_version {d.protocol_version}")
    check(d.middleware_key == "conformance", f"middleware_key {d.middleware_key!r}")
    check(d.needs_context, "needs_context not set")
    check(
        d.failure_mode in (pb.FAILURE_MODE_UNSPECIFIED, pb.FAILURE_MODE_CLOSED),
        f"failure_mode {pb.FailureMode.Name(d.failure_mode)}, expected FAILURE_MODE_CLOSED",
    )
    mismatches = hook_mismatches(d)
    check(not mismatches, "; ".join(mismatches))
    check([tool.name for tool in d.tools] == ["conformance_echo"], "tool conformance_echo missing")
    check(d.tools[0].read_only, "conformance_echo is not read_only")


async def deadline_then_cancel(t: Target) -> None:
    session = t.session()
    try:
        await session.send(
            invocation("1", pb.HOOK_ON_REASONING, "flat", "sleep", timeout=0.3, **_REASONING)
        )
        await session.silence(SHORT_SILENCE, "a sleeping hook misses its deadline")
        await session.send(_req("1", cancel=pb.CancelInvocation()))
        await session.silence(CANCEL_SILENCE, "nothing more after cancel")
        await session.send(invocation("2", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await session.expect("2", "call_next")
    finally:
        session.cancel()


async def cancel_mid_invocation(t: Target) -> None:
    session = t.session()
    try:
        await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await session.expect("1", "call_next")
        await session.send(_req("1", cancel=pb.CancelInvocation()))
        await session.send(_req("1", outcome=_END))
        await session.silence(CANCEL_SILENCE, "a cancelled invocation gets no answer")
    finally:
        session.cancel()


async def unknown_invocations_ignored(t: Target) -> None:
    session = t.session()
    try:
        await session.send(_req("ghost", item=pb.DownstreamItem()))
        await session.send(_req("ghost", outcome=_END))
        await session.silence(SHORT_SILENCE, "items and outcomes of no invocation are ignored")
        await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await session.expect("1", "call_next")
    finally:
        session.cancel()


async def interleaved_invocations(t: Target) -> None:
    session = t.session()
    try:
        await session.send(invocation("a", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await session.send(
            invocation("b", pb.HOOK_ON_REASONING, "agentic", "override", **_REASONING)
        )
        answers = {}
        for _ in range(2):
            message = await session.next("call_next for a and b")
            answers[message.invocation_id] = message
        check(set(answers) == {"a", "b"}, f"answers for {sorted(answers)}")
        check(answers["b"].call_next.reasoning.tool_choice == "none", "b's override lost")
        check(answers["a"].call_next.WhichOneof("overrides") is None, "a got b's override")
        await session.send(_req("b", outcome=_END))
        await session.expect("b", "done")
        await session.send(_req("a", outcome=_END))
        await session.expect("a", "done")
    finally:
        session.cancel()


async def ids_restart_per_stream(t: Target) -> None:
    """Two streams open at once, both using id "1": each gets its own answers, on itself."""
    plain, other = t.session(), t.session()
    try:
        await plain.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await plain.expect("1", "call_next")
        await other.send(invocation("1", pb.HOOK_ON_REASONING, "flat", "override", **_REASONING))
        try:
            call_next = (await other.expect("1", "call_next"))[-1].call_next
        except RuleFailure:
            check(
                plain.inbox.empty(),
                "the answer to the second stream's invocation 1 came on the first stream: "
                "invocation ids belong to their stream",
            )
            raise
        check(call_next.reasoning.tool_choice == "none", "the second stream's override lost")
        for session, bystander in ((other, plain), (plain, other)):
            await session.send(_req("1", outcome=_END))
            await session.expect("1", "done")
            await bystander.silence(SHORT_SILENCE, "answers stay on their own stream")
            code = await session.close()
            check(code == grpc.StatusCode.OK, f"stream ended with {code.name}")
    finally:
        plain.cancel()
        other.cancel()


async def nothing_after_done(t: Target) -> None:
    """One done ends an invocation: nothing more for it, asked or short-circuited."""
    session = t.session()
    try:
        await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_REASONING))
        await session.expect("1", "call_next")
        await session.send(_req("1", outcome=_END))
        await session.expect("1", "done")
        await session.silence(SHORT_SILENCE, "after done")
        sc = invocation("2", pb.HOOK_ON_REASONING, "flat", "short-circuit", **_REASONING)
        await session.send(sc)
        await session.expect("2", "done")
        await session.silence(SHORT_SILENCE, "after done")
    finally:
        session.cancel()


async def clean_close_cancels_open(t: Target) -> None:
    session = t.session()
    try:
        await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", "sleep", **_REASONING))
        code = await session.close()
        check(code == grpc.StatusCode.OK, f"closing the requests ended the stream {code.name}")
    finally:
        session.cancel()


async def transform_system_prompt(t: Target) -> None:
    response = await t.stub.TransformSystemPrompt(
        pb.TransformSystemPromptRequest(prompt="base", reply_id="r", state=struct({"a": 1})),
        timeout=t.timeout,
        metadata=t.metadata,
    )
    check(response.prompt == "base [conformance]", f"prompt {response.prompt!r}")
    check(not response.mutation.HasField("state"), "the prompt transform changed the state")


async def after_agent(t: Target) -> None:
    final = message_to_proto(make_text("flat", "assistant", "the answer"))
    try:
        await t.stub.AfterAgent(
            pb.AfterAgentRequest(reply_id="r"), timeout=t.timeout, metadata=t.metadata
        )
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        check(code == grpc.StatusCode.INVALID_ARGUMENT, f"no final message: {code.name}")
    else:
        check(False, "AfterAgent without a final message did not fail with INVALID_ARGUMENT")
    request = pb.AfterAgentRequest(
        reply_id="r", kind=pb.MESSAGE_KIND_FLAT, final_message=final, state=struct({"count": 2})
    )
    response = await t.stub.AfterAgent(
        request,
        timeout=t.timeout,
        metadata=t.metadata,
    )
    state = last_state([pb.InterceptResponse(mutate=response.mutation)])
    check(state == {"count": 2, "after": True}, f"state {state}")


async def call_tool(t: Target) -> None:
    async def run(name: str, arguments: str) -> list[pb.CallToolResponse]:
        request = pb.CallToolRequest(name=name, arguments=arguments, call_id="c1", reply_id="r")
        stream = t.stub.CallTool(request, timeout=t.timeout, metadata=t.metadata)
        return [piece async for piece in stream]

    text = f"hello {uuid.uuid4().hex[:8]}"
    pieces = await run("conformance_echo", json.dumps({"text": text}))
    echoed = "".join(p.text for p in pieces)
    check(echoed == text, f"echo of {text!r} streamed {echoed!r}")
    check(
        pieces[-1].WhichOneof("piece") == "end"
        and pieces[-1].end == content_pb2.TOOL_RESULT_STATE_SUCCESS,
        "echo did not end with end=SUCCESS",
    )
    pieces = await run("conformance_echo", '{"text": "fail"}')
    check(pieces[-1].end == content_pb2.TOOL_RESULT_STATE_ERROR, "fail did not end with ERROR")
    for bad in ("not json", '{"text": 5}'):
        try:
            pieces = await run("conformance_echo", bad)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            check(code == grpc.StatusCode.INVALID_ARGUMENT, f"arguments {bad!r}: {code.name}")
        else:
            check(False, f"arguments {bad!r} were not refused with INVALID_ARGUMENT")
    try:
        await run("no_such_tool", "{}")
    except grpc.aio.AioRpcError as exc:
        check(exc.code() == grpc.StatusCode.NOT_FOUND, f"unknown tool: {exc.code().name}")
    else:
        check(False, "an unknown tool did not fail with NOT_FOUND")


async def token_required(t: Target) -> None:
    try:
        await t.stub.Describe(pb.DescribeRequest(protocol_version=1), timeout=t.timeout)
    except grpc.aio.AioRpcError as exc:
        check(exc.code() == grpc.StatusCode.UNAUTHENTICATED, f"no token: {exc.code().name}")
    else:
        check(False, "a call without the bearer token succeeded")


STREAM_RULES = {
    "describe": describe,
    "stream.deadline_then_cancel": deadline_then_cancel,
    "stream.cancel_mid_invocation": cancel_mid_invocation,
    "stream.unknown_invocations_ignored": unknown_invocations_ignored,
    "stream.interleaved_invocations": interleaved_invocations,
    "stream.ids_restart_per_stream": ids_restart_per_stream,
    "stream.nothing_after_done": nothing_after_done,
    "stream.clean_close_cancels_open": clean_close_cancels_open,
    "transform_system_prompt": transform_system_prompt,
    "after_agent": after_agent,
    "call_tool": call_tool,
}
"""Rules run once."""
