"""The Node.js sidecar of clients/node, written from the protos alone, serving a real agent."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, ClassVar

import grpc
import pytest
from google.protobuf import struct_pb2

from hookmesh.agent import Agent
from hookmesh.conformance import run_conformance
from hookmesh.middleware import Middleware
from hookmesh.models import ModelChunk, ModelResponse, ScriptedChatModel, ScriptedTurn
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import AgentEvent, CustomEvent, Message, MessageKind, Usage, text_of
from hookmesh.v1 import message_pb2 as _message_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs, echo, report
from tests.node_process import start_node_sidecar, stop_node

pytestmark = pytest.mark.timeout(60)

_KEY = "node-token-counter"


@pytest.fixture(scope="module")
def sidecar() -> Iterator[str]:
    """The address of one node sidecar, shared by the module's tests."""
    proc, address = start_node_sidecar()
    try:
        yield address
    finally:
        stop_node(proc)


@pytest.fixture(scope="module")
def sdk_sidecar() -> Iterator[str]:
    """The same middleware on the sidecar SDK: clients/node/examples/token-counter.js."""
    proc, address = start_node_sidecar(script="examples/token-counter.js")
    try:
        yield address
    finally:
        stop_node(proc)


# --- through a real agent --------------------------------------------------------------------


class _SliceReporter(Middleware):
    """Emits the node middleware's state slice as ``report:node-token-counter`` before reply_end."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reply": ("reply_end",)}

    async def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            if event.type == "reply_end":
                by_reply = agent.state.middle_context.get(_KEY, {})
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name=f"report:{_KEY}",
                    value=dict(by_reply.get(agent.reply_id, {})),
                )
            yield event


class _UnmeteredModel(ScriptedChatModel):
    """A scripted model that reports no usage, as some providers do."""

    async def __call__(self, messages: Sequence[Message], **kwargs: Any) -> Any:
        result = await super().__call__(messages, **kwargs)
        if isinstance(result, ModelResponse):
            result.usage = None
            return result
        return self._strip(result)

    @staticmethod
    async def _strip(chunks: AsyncIterator[ModelChunk]) -> AsyncIterator[ModelChunk]:
        async for chunk in chunks:
            chunk.usage = None
            yield chunk


# Two model calls in one reply: a tool call with some text, then the answer. With the
# default 8-character chunks, "let me check that" streams as "let me c|heck tha|t": words
# must be counted on the joined text, not per chunk.
_TURNS = (
    ScriptedTurn(
        text="let me check that",
        tool_calls=[("echo", {"text": "hi"})],
        usage=Usage(input_tokens=20, output_tokens=11),
    ),
    ScriptedTurn(text="the answer is forty two", usage=Usage(input_tokens=30, output_tokens=7)),
)
_EXPECTED = {"reported": [11, 7], "absent": [4, 5]}
"""node.tokens per model call: usage.output_tokens, or the answer's word count without usage."""


@pytest.mark.parametrize("usage", ["reported", "absent"])
@pytest.mark.parametrize("stream", [False, True], ids=["full", "stream"])
@pytest.mark.parametrize("kind", ["flat", "agentic"])
@pytest.mark.parametrize("served_by", ["sidecar", "sdk_sidecar"], ids=["raw", "sdk"])
async def test_agent_with_node_sidecar_counts_tokens_per_model_call(
    request: pytest.FixtureRequest, served_by: str, kind: MessageKind, stream: bool, usage: str
) -> None:
    """The raw-protocol sidecar.js and the SDK example count alike through a real agent."""
    sidecar: str = request.getfixturevalue(served_by)
    prompts: list[list[Message]] = []

    def script(messages: Sequence[Message], unused_tools: Any, unused_choice: Any) -> ScriptedTurn:
        prompts.append(list(messages))
        return _TURNS[len(prompts) - 1]

    model_class = ScriptedChatModel if usage == "reported" else _UnmeteredModel
    remote = await RemoteMiddleware.connect(sidecar, timeout=5)
    try:
        agent = Agent(
            model_class(script, stream=stream),
            kind=kind,
            system_prompt="base",
            tools=[echo],
            middlewares=[remote, _SliceReporter()],
        )
        events = await collect(agent.reply("hello"), timeout=SHORT_TIMEOUT)
    finally:
        await remote.aclose()

    end = events[-1]
    assert end.type == "reply_end"
    assert end.finish_reason == "completed", end.error  # type: ignore[union-attr]
    assert len(prompts) == 2
    for messages in prompts:
        assert text_of(messages[0]) == "base [node sidecar]"

    # One node.tokens per model call, emitted inside it: after its start, before its end.
    expected = _EXPECTED[usage]
    marks = [
        (e.type, e.value if isinstance(e, CustomEvent) else None)
        for e in events
        if e.type in ("model_call_start", "model_call_end")
        or (isinstance(e, CustomEvent) and e.name == "node.tokens")
    ]
    assert marks == [
        ("model_call_start", None),
        ("custom", expected[0]),
        ("model_call_end", None),
        ("model_call_start", None),
        ("custom", expected[1]),
        ("model_call_end", None),
    ]
    assert [e.type for e in events].count("tool_result_end") == 1
    # The state slice accumulated over both calls, in the agent's middle_context.
    assert report(events, _KEY) == {"tokens": sum(expected), "calls": 2}
    assert len([e for e in customs(events) if e.name == "node.tokens"]) == 2


# --- the raw protocol ------------------------------------------------------------------------


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _request(invocation_id: str, **message: Any) -> _mw_pb2.InterceptRequest:
    return _mw_pb2.InterceptRequest(invocation_id=invocation_id, **message)


def _model_call(invocation_id: str, state: dict[str, Any]) -> _mw_pb2.InterceptRequest:
    return _mw_pb2.InterceptRequest(
        invocation_id=invocation_id,
        invocation=_mw_pb2.HookInvocation(
            hook=_mw_pb2.HOOK_ON_MODEL_CALL,
            reply_id="r1",
            kind=_mw_pb2.MESSAGE_KIND_FLAT,
            state=_struct(state),
            model_call=_mw_pb2.ModelCallArgs(model_name="m", tool_choice="auto"),
        ),
    )


def _answer(invocation_id: str, text: str, state: dict[str, Any]) -> _mw_pb2.InterceptRequest:
    message = _message_pb2.Message(
        id="a1", flat=_message_pb2.FlatMessage(role=_message_pb2.ROLE_ASSISTANT, content=text)
    )
    return _mw_pb2.InterceptRequest(
        invocation_id=invocation_id,
        outcome=_mw_pb2.DownstreamOutcome(
            state=_struct(state), model_response=_mw_pb2.ModelResponse(message=message)
        ),
    )


async def _read(call: Any) -> _mw_pb2.InterceptResponse:
    async with asyncio.timeout(SHORT_TIMEOUT):
        response = await call.read()
    assert response is not grpc.aio.EOF, "the sidecar ended the stream early"
    return response  # type: ignore[no-any-return]


async def test_intercept_stream_survives_bad_input_cancel_and_ends_with_the_requests(
    sidecar: str,
) -> None:
    async with grpc.aio.insecure_channel(sidecar) as channel:
        stub = _mw_grpc.MiddlewareServiceStub(channel)
        description = await stub.Describe(_mw_pb2.DescribeRequest(protocol_version=1), timeout=5)
        assert description.protocol_version == 1
        assert description.middleware_key == _KEY
        assert [(h.hook, h.mode, list(h.subscriptions)) for h in description.hooks] == [
            (_mw_pb2.HOOK_ON_MODEL_CALL, _mw_pb2.HOOK_MODE_INTERCEPT, ["chunk"]),
            (_mw_pb2.HOOK_ON_SYSTEM_PROMPT, _mw_pb2.HOOK_MODE_INTERCEPT, []),
        ]
        assert not description.needs_context
        assert not description.tools

        call = stub.Intercept(timeout=SHORT_TIMEOUT)
        # An item and an outcome for invocations that never started: ignored.
        await call.write(_request("ghost", item=_mw_pb2.DownstreamItem()))
        await call.write(_answer("ghost", "boo", {}))
        await call.write(_request("empty"))
        # A hook it does not serve: a failed `done`, not a broken stream.
        on_reply = _mw_pb2.HookInvocation(hook=_mw_pb2.HOOK_ON_REPLY, reply=_mw_pb2.ReplyArgs())
        await call.write(_request("1", invocation=on_reply))
        refused = await _read(call)
        assert refused.invocation_id == "1"
        assert refused.done.WhichOneof("result") == "error"
        assert refused.done.error.reason == "HOOK_NOT_SERVED"
        # Started, then cancelled: the late outcome gets no answer.
        await call.write(_model_call("2", {}))
        started = await _read(call)
        assert (started.invocation_id, started.WhichOneof("message")) == ("2", "call_next")
        assert started.call_next.WhichOneof("overrides") is None
        await call.write(_request("2", cancel=_mw_pb2.CancelInvocation()))
        await call.write(_answer("2", "never counted", {}))
        # A full invocation without usage: 3 words, other state keys kept. Answers come in
        # order on one stream, so anything for "2" would arrive before these.
        state = {"tokens": 4, "calls": 1, "note": "kept"}
        await call.write(_model_call("3", state))
        assert (await _read(call)).WhichOneof("message") == "call_next"
        await call.write(_answer("3", "one  two\nthree", state))
        answers = [await _read(call) for _ in range(3)]
        assert [(a.invocation_id, a.WhichOneof("message")) for a in answers] == [
            ("3", "mutate"),
            ("3", "emit"),
            ("3", "done"),
        ]
        mutated = dict(answers[0].mutate.state)
        assert mutated == {"tokens": 7, "calls": 2, "note": "kept"}
        emitted = answers[1].emit
        assert (emitted.reply_id, emitted.custom.name) == ("r1", "node.tokens")
        assert emitted.custom.value.number_value == 3
        assert answers[2].done.WhichOneof("result") is None
        # A clean close of the requests ends the responses cleanly.
        await call.done_writing()
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK


async def test_transform_system_prompt_appends_the_tag(sidecar: str) -> None:
    async with grpc.aio.insecure_channel(sidecar) as channel:
        stub = _mw_grpc.MiddlewareServiceStub(channel)
        request = _mw_pb2.TransformSystemPromptRequest(
            prompt="base", reply_id="r1", state=_struct({"a": 1})
        )
        response = await stub.TransformSystemPrompt(request, timeout=5)
        assert response.prompt == "base [node sidecar]"
        assert not response.HasField("mutation")


async def test_token_env_requires_the_bearer_token() -> None:
    env = {**os.environ, "NODE_SIDECAR_TEST_TOKEN": "s3cret"}
    proc, address = start_node_sidecar("--token-env", "NODE_SIDECAR_TEST_TOKEN", env=env)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = _mw_grpc.MiddlewareServiceStub(channel)
            request = _mw_pb2.DescribeRequest(protocol_version=1)
            for metadata in [(), (("authorization", "Bearer wrong"),)]:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Describe(request, timeout=5, metadata=metadata)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            call = stub.Intercept(timeout=5)
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.UNAUTHENTICATED
        remote = await RemoteMiddleware.connect(address, timeout=5, token="s3cret")
        try:
            assert remote.middleware_key() == _KEY
        finally:
            await remote.aclose()
    finally:
        stop_node(proc)


async def test_the_sdk_token_counter_passes_the_generic_rules(sdk_sidecar: str) -> None:
    results = await run_conformance(sdk_sidecar, generic=True, timeout=3)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    names = {r.name for r in results}
    assert {"generic.on_model_call.answers", "generic.unary"} <= names
