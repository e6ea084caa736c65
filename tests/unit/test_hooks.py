"""The middleware hook rules of ARCHITECTURE.md, one test each, on both message kinds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware, MiddlewareDefinitionError
from hookmesh.models import ModelError, ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    ImageBlock,
    InlineSource,
    Message,
    MessageKind,
    TextBlock,
    text_of,
    to_agentic,
)
from tests import middlewares as mws
from tests.agent_helpers import collect, customs, echo, report, types
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(30)


def make_agent(
    kind: MessageKind,
    turns: Sequence[ScriptedTurn | str] | Any,
    middlewares: Sequence[Middleware] = (),
    **kw: Any,
) -> tuple[Agent, ScriptedChatModel]:
    stream = kw.pop("stream", False)
    model = ScriptedChatModel(turns, stream=stream)
    return Agent(model, kind=kind, tools=[echo], middlewares=middlewares, **kw), model


async def test_bucketing_by_method_identity_and_empty_chains_call_the_core(
    kind: MessageKind,
) -> None:
    agent, _ = make_agent(kind, ["hi"], [mws.ForceNoTools()])
    assert agent._reasoning_chain != agent._core_reasoning
    assert agent._reply_chain == agent._core_reply
    assert agent._model_chain == agent._core_model_call
    assert agent._acting_chain == agent._core_acting
    assert agent._permission_chain == agent._core_permission
    assert agent._compress_chain is None
    bare, _ = make_agent(kind, ["hi"])
    assert bare._reasoning_chain == bare._core_reasoning
    assert mws.ForceNoTools().implements("on_reasoning")
    assert not mws.ForceNoTools().implements("on_model_call")


async def test_next_handler_overrides_rewrite_downstream_kwargs(
    kind: MessageKind, attach: Attach
) -> None:
    turn = ScriptedTurn(text="", tool_calls=[("echo", {"text": "x"})])
    agent, model = make_agent(kind, [turn], [await attach(mws.ForceNoTools())])
    events = await collect(agent.reply("go"))
    assert model.last_tool_choice == "none"
    assert "tool_call_start" not in types(events)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_not_calling_next_handler_short_circuits(kind: MessageKind, attach: Attach) -> None:
    agent, model = make_agent(kind, ["the model's answer"], [await attach(mws.CannedAnswer())])
    await collect(agent.reply("go"))
    assert model.calls == 0
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "canned answer"


async def test_index_zero_is_the_outermost_layer(kind: MessageKind, attach: Attach) -> None:
    layers = [await attach(mws.Tagger(n)) for n in "ABC"]
    agent, _ = make_agent(kind, ["answer"], layers)
    events = await collect(agent.reply("go"))
    marks = [(e.name, e.value) for e in customs(events) if e.name in ("pre", "post")]
    assert marks == [
        ("pre", "A"),
        ("pre", "B"),
        ("pre", "C"),
        ("post", "C"),
        ("post", "B"),
        ("post", "A"),
    ]
    # on_model_call post-processing: the innermost layer (C) sees the response first.
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "answer|C|B|A"


@pytest.mark.parametrize("stream", [False, True])
async def test_model_call_hook_sees_full_responses_and_the_end_of_streams(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    agent, _ = make_agent(
        kind, ["one two three four five"], [await attach(mws.StreamWatcher())], stream=stream
    )
    events = await collect(agent.reply("go"))
    state = report(events, "StreamWatcher")
    deltas = [e for e in events if e.type == "text_block_delta"]
    if stream:
        # 3 text chunks of 8 characters plus the final usage chunk, all seen before the end.
        assert state == {"chunks": 4, "ended_after": 4}
        assert len(deltas) == 3
    else:
        assert state == {"full_responses": 1}
        assert len(deltas) == 1
    assert "".join(e.delta for e in deltas) == "one two three four five"  # type: ignore[union-attr]


async def test_acting_wraps_only_tool_io(kind: MessageKind, attach: Attach) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("echo", {"text": "a"}), ("echo", {"text": 5})]),
        ScriptedTurn(tool_calls=[("echo", {"text": "b"})]),
        "done",
    ]
    agent, _ = make_agent(
        kind, turns, [await attach(mws.ActingProbe()), await attach(mws.Denier("echo2"))]
    )
    events = await collect(agent.reply("go"))
    state = report(events, "ActingProbe")
    # The call with invalid arguments never reaches on_acting; the result is written outside
    # the hook: unanswered when acting starts and still unanswered when it ends.
    assert state["calls"] == ["call_1", "call_3"]
    assert state["unanswered_at_start"] == [True, True]
    assert state["unanswered_at_end"] == [True, True]
    results = [e for e in events if e.type == "tool_result_end"]
    assert [(e.call_id, e.state) for e in results] == [  # type: ignore[union-attr]
        ("call_1", "success"),
        ("call_2", "error"),
        ("call_3", "success"),
    ]


async def test_permission_hook_denies_outside_acting(kind: MessageKind, attach: Attach) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "a"})]), "ok"]
    agent, _ = make_agent(
        kind, turns, [await attach(mws.ActingProbe()), await attach(mws.Denier("echo"))]
    )
    events = await collect(agent.reply("go"))
    assert "calls" not in report(events, "ActingProbe")
    end = [e for e in events if e.type == "tool_result_end"]
    assert [e.state for e in end] == ["denied"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("turns", "fails", "expected_notes", "reason"),
    [
        (["final answer"], (), ["A", "B"], "completed"),
        ([ScriptedTurn(error="model down")], (), [], "error"),
        (["final answer"], ("A",), [], "error"),
        (["final answer"], ("B",), ["A"], "error"),
        ([ScriptedTurn(tool_calls=[("echo", {"text": "x"})])] * 3, (), [], "exceed_max_iters"),
    ],
    ids=["completed", "model-error", "first-fails", "second-fails", "max-iters"],
)
async def test_after_agent_runs_only_after_success_in_order_fail_fast(
    kind: MessageKind,
    attach: Attach,
    turns: list[Any],
    fails: tuple[str, ...],
    expected_notes: list[str],
    reason: str,
) -> None:
    afters = [await attach(mws.AfterNote(n, fail=n in fails)) for n in "AB"]
    agent, _ = make_agent(kind, turns, afters, max_iters=2)
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == reason  # type: ignore[union-attr]
    notes = [text_of(m) for m in agent.state.context if text_of(m).startswith("note:")]
    assert notes == [f"note:{n}" for n in expected_notes]
    if fails:
        assert events[-1].error.source == f"middleware:after-{fails[0]}"  # type: ignore[union-attr]


async def test_after_agent_runs_after_a_return_directly_tool(
    kind: MessageKind, attach: Attach
) -> None:
    from hookmesh.agent import tool

    @tool(return_directly=True)
    def lookup(key: str) -> str:
        return f"value of {key}"

    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("lookup", {"key": "k"})]), "never"])
    agent = Agent(model, kind=kind, tools=[lookup], middlewares=[await attach(mws.AfterNote("A"))])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert model.calls == 1
    assert agent.final_message is not None and text_of(agent.final_message) == "value of k"
    assert text_of(agent.state.context[-1]) == "note:A"


@pytest.mark.parametrize("awaiting", ["confirmation", "external_execution"])
async def test_after_agent_never_runs_when_a_reply_pauses_only_when_it_completes(
    kind: MessageKind, attach: Attach, awaiting: str
) -> None:
    from hookmesh.agent import Confirmation, ExternalResult, Resume, external_tool, tool

    @tool(needs_confirmation=True)
    def wipe(path: str) -> str:
        return f"wiped {path}"

    ask_later = external_tool("wipe", "Wipe a path elsewhere.", {"type": "object"})
    turns = [ScriptedTurn(tool_calls=[("wipe", {"path": "/tmp/x"})]), "all done"]
    agent = Agent(
        ScriptedChatModel(turns),
        kind=kind,
        tools=[wipe if awaiting == "confirmation" else ask_later],
        middlewares=[await attach(mws.AfterNote("A"))],
    )
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == f"awaiting_{awaiting}"  # type: ignore[union-attr]
    assert agent.state.pending is not None
    assert not any(text_of(m).startswith("note:") for m in agent.state.context)
    call_id = events[-2].tool_calls[0].id  # type: ignore[union-attr]
    resume = (
        Resume(confirmations=[Confirmation(call_id=call_id, confirmed=True)])
        if awaiting == "confirmation"
        else Resume(external_results=[ExternalResult(call_id=call_id, output="gone")])
    )
    resumed = await collect(agent.resume(resume))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    notes = [text_of(m) for m in agent.state.context if text_of(m).startswith("note:")]
    assert notes == ["note:A"]


async def test_a_return_directly_tools_blocks_all_reach_the_final_message(
    kind: MessageKind, attach: Attach
) -> None:
    from hookmesh.agent import tool

    image = ImageBlock(source=InlineSource(data=b"\x89PNG-chart", mime_type="image/png"))

    @tool(return_directly=True)
    def chart(city: str) -> list[Any]:
        return [TextBlock(text=f"{city} this week:"), image, TextBlock(text="source: met.no")]

    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("chart", {"city": "Oslo"})]), "never"])
    agent = Agent(model, kind=kind, tools=[chart], middlewares=[await attach(mws.FinalShape())])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    final = agent.final_message
    assert final is not None and final.kind == kind and final.role == "assistant"
    assert to_agentic([final])[0].blocks == [
        TextBlock(text="Oslo this week:"),
        image,
        TextBlock(text="source: met.no"),
    ]
    assert agent.state.context[-2] is final
    assert text_of(agent.state.context[-1]) == "final:text,image,text"


async def test_after_agent_never_runs_after_an_interrupt(kind: MessageKind, attach: Attach) -> None:
    gate = asyncio.Event()

    def script(messages: Any, tools: Any, tool_choice: Any) -> ScriptedTurn:
        return ScriptedTurn(text="a long answer that is interrupted")

    model = ScriptedChatModel(script, stream=True, chunk_size=2)
    agent = Agent(model, kind=kind, middlewares=[await attach(mws.AfterNote("A"))])
    events: list[AgentEvent] = []
    async for event in agent.reply("go"):
        events.append(event)
        if event.type == "text_block_delta" and not gate.is_set():
            gate.set()
            assert agent.interrupt()
    assert events[-1].finish_reason == "interrupted"  # type: ignore[union-attr]
    assert not any(text_of(m).startswith("note:") for m in agent.state.context)


async def test_state_lives_per_reply_so_one_instance_serves_concurrent_agents(
    kind: MessageKind, attach: Attach
) -> None:
    counter = await attach(mws.CallCounter())
    call = ScriptedTurn(tool_calls=[("echo", {"text": "x"})])
    one, _ = make_agent(kind, [call, "done"], [counter], name="one", stream=True)
    three, _ = make_agent(kind, [call, call, call, "done"], [counter], name="three", stream=True)
    ev_one, ev_three = await asyncio.gather(collect(one.reply("go")), collect(three.reply("go")))
    assert report(ev_one, "CallCounter") == {"calls": 2, "agent": "one"}
    assert report(ev_three, "CallCounter") == {"calls": 4, "agent": "three"}
    # A finished reply leaves no state behind.
    assert one.state.middle_context == {"CallCounter": {}}


async def test_list_tools_adds_tools_and_system_prompts_chain_in_order(
    kind: MessageKind, attach: Attach
) -> None:
    seen: list[Sequence[Message]] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        seen.append(messages)
        if len(seen) == 1:
            return ScriptedTurn(tool_calls=[("shout", {"text": "hey"})])
        return ScriptedTurn(text="done")

    middlewares = [
        await attach(mws.ToolGiver()),
        await attach(mws.PromptSuffix("+A")),
        await attach(mws.PromptSuffix("+B")),
    ]
    agent = Agent(
        ScriptedChatModel(script), kind=kind, system_prompt="base", middlewares=middlewares
    )
    events = await collect(agent.reply("go"))
    assert text_of(seen[0][0]) == "base+A+B"
    deltas = [e.text for e in events if e.type == "tool_result_delta"]  # type: ignore[union-attr]
    assert deltas == ["HEY"]


async def test_the_system_prompt_is_built_before_each_reasoning_step(
    kind: MessageKind, attach: Attach
) -> None:
    seen: list[str] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        seen.append(text_of(messages[0]))
        if len(seen) % 3:
            return ScriptedTurn(tool_calls=[("echo", {"text": "x"})])
        return ScriptedTurn(text="done")

    agent = Agent(
        ScriptedChatModel(script),
        kind=kind,
        system_prompt="base",
        tools=[echo],
        middlewares=[await attach(mws.PromptStep())],
    )
    await collect(agent.reply("go"))
    await collect(agent.reply("again"))
    # A tool run between two steps (e.g. a memory file written) reaches the next prompt.
    assert seen == [f"base|step {n}" for n in (1, 2, 3, 1, 2, 3)]


async def test_without_prompt_middlewares_the_system_message_is_built_once(
    kind: MessageKind,
) -> None:
    seen: list[Message] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        seen.append(messages[0])
        return ScriptedTurn(tool_calls=[("echo", {"text": "x"})] if len(seen) == 1 else [])

    agent = Agent(ScriptedChatModel(script), kind=kind, system_prompt="base", tools=[echo])
    await collect(agent.reply("go"))
    await collect(agent.reply("again"))
    assert len(seen) == 3 and text_of(seen[0]) == "base" and seen[0].role == "system"
    assert all(message is seen[0] for message in seen)
    bare = Agent(ScriptedChatModel(script), kind=kind, tools=[echo])
    await collect(bare.reply("go"))
    assert seen[-1].role == "user"  # no system prompt: no system message


HOOK_CASES = [
    ("on_reply", False),
    ("on_reasoning", False),
    ("on_reasoning", True),
    ("on_model_call", False),
    ("on_model_call", True),
    ("on_acting", False),
    ("on_acting", True),
    ("on_check_permission", False),
    ("on_system_prompt", False),
    ("after_agent", False),
]


@pytest.mark.parametrize(("hook", "after_next"), HOOK_CASES)
async def test_fail_closed_ends_the_reply_naming_the_middleware(
    kind: MessageKind, attach: Attach, hook: str, after_next: bool
) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done"]
    agent, _ = make_agent(kind, turns, [await attach(mws.Exploder(hook, after_next=after_next))])
    events = await collect(agent.reply("go"))
    end = events[-1]
    assert end.type == "reply_end" and end.finish_reason == "error"
    assert end.error is not None
    assert end.error.reason == "MIDDLEWARE_FAILED"
    assert end.error.source == f"middleware:exploder-{hook}"
    assert f"boom in {hook}" in end.error.message
    assert [e.type for e in events].count("reply_end") == 1


@pytest.mark.parametrize(("hook", "after_next"), HOOK_CASES)
async def test_fail_open_skips_the_middleware_and_the_reply_goes_on(
    kind: MessageKind, attach: Attach, hook: str, after_next: bool, caplog: pytest.LogCaptureFixture
) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done"]
    agent, model = make_agent(
        kind, turns, [await attach(mws.Exploder(hook, fail_open=True, after_next=after_next))]
    )
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert agent.final_message is not None and text_of(agent.final_message) == "done"
    assert model.calls == 2
    assert [e.type for e in events].count("tool_result_end") == 1
    assert f"boom in {hook}" in caplog.text


async def test_fail_open_plain_function_hooks_are_skipped_on_their_own_errors(
    kind: MessageKind, attach: Attach
) -> None:
    agent, model = make_agent(kind, ["done"], [await attach(mws.PlainFailOpen(raise_first=True))])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert model.calls == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_fail_open_never_swallows_a_downstream_error(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    turns = [ScriptedTurn(error="the model is down")]
    middlewares = [await attach(mws.PlainFailOpen(raise_first=False))]
    agent, _ = make_agent(kind, turns, middlewares, stream=stream)
    events = await collect(agent.reply("go"))
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert (end.error.reason, end.error.source) == ("MODEL_ERROR", "model")  # type: ignore[union-attr]


class BreaksMidStream(ScriptedChatModel):
    """Streams one chunk, then fails."""

    async def _chunks(self, *args: Any) -> Any:  # type: ignore[override]
        async for chunk in super()._chunks(*args):
            yield chunk
            raise ModelError("stream cut")


async def test_fail_open_never_swallows_a_downstream_stream_error(
    kind: MessageKind, attach: Attach
) -> None:
    model = BreaksMidStream(["a long answer"], stream=True)
    agent = Agent(
        model, kind=kind, middlewares=[await attach(mws.PlainFailOpen(raise_first=False))]
    )
    events = await collect(agent.reply("go"))
    end = events[-1]
    assert "text_block_delta" in types(events)
    assert (end.finish_reason, end.error.reason) == ("error", "MODEL_ERROR")  # type: ignore[union-attr]


class _SyncPrompt(Middleware):
    def on_system_prompt(self, agent: Any, prompt: str) -> str:  # type: ignore[override]
        return prompt.upper()


class _SyncModelCall(Middleware):
    def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        return next_handler()


class _AsyncReply(Middleware):
    async def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:  # type: ignore[override]
        return next_handler()


class _PassThroughModelCall(Middleware):
    def on_model_call(  # type: ignore[override]
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> Awaitable[Any]:
        return next_handler()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("cls", "problem"),
    [
        (_SyncPrompt, "on_system_prompt must be 'async def'"),
        (_SyncModelCall, "on_model_call must be 'async def'"),
        (_AsyncReply, "on_reply must be an async generator"),
    ],
)
def test_a_mis_shaped_hook_is_refused_when_attached(cls: type[Middleware], problem: str) -> None:
    with pytest.raises(MiddlewareDefinitionError, match=problem) as caught:
        Agent(ScriptedChatModel(["hi"]), middlewares=[cls()])
    assert cls.__name__ in str(caught.value)


def test_the_zero_cost_pass_through_style_is_accepted() -> None:
    agent = Agent(ScriptedChatModel(["hi"]), middlewares=[_PassThroughModelCall()])
    assert agent.middlewares
