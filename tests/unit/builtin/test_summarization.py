"""SummarizationMiddleware: triggers, the summary message, kept user turns, chunks, retries."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware.builtin.retry import RetryPolicy
from hookmesh.middleware.builtin.summarization import (
    DEFAULT_INSTRUCTION,
    SUMMARY_EVENT,
    SUMMARY_METADATA_KEY,
    SUMMARY_PREFIX,
    SummarizationMiddleware,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    Message,
    MessageKind,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    estimate_tokens,
    is_system,
    make_assistant,
    make_text,
    make_tool_result,
    make_user_text,
    text_of,
    tool_calls,
    tool_results,
    unanswered_tool_calls,
)
from tests.agent_helpers import collect, customs, echo
from tests.conftest import Attach

NO_WAIT = {"max_attempts": 3, "initial_delay": 0.0, "jitter": 0.0}
"""Retries at once: the tests count attempts, they do not wait for backoff."""

pytestmark = pytest.mark.timeout(30)


class Summariser:
    """A scripted summarising model that records each prompt it was given."""

    def __init__(self, *, fail: int = 0, stream: bool = False, answer: str = "") -> None:
        self.prompts: list[Sequence[Message]] = []
        self.choices: list[tuple[Any, Any]] = []
        self.fail = fail
        self.answer = answer
        self.model = ScriptedChatModel(self._script, stream=stream, chunk_size=5)

    def _script(self, messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        self.prompts.append(messages)
        self.choices.append((list(tools), tool_choice))
        if len(self.prompts) <= self.fail:
            return ScriptedTurn(error=f"summariser down ({len(self.prompts)})")
        return ScriptedTurn(text=self.answer or f"SUMMARY-{len(self.prompts)}")


def _history(kind: MessageKind, steps: int = 2, size: int = 200) -> list[Message]:
    """System, then per step: a user turn, an assistant call and its result, an answer."""
    msgs = [make_text(kind, "system", "be brief", id="sys")]
    for i in range(steps):
        call = ToolCall(id=f"c{i}", name="echo", arguments='{"text": "x"}')
        msgs += [
            make_user_text(kind, f"question {i}", id=f"u{i}"),
            make_assistant(kind, "", [call], id=f"a{i}"),
            make_tool_result(kind, call.id, "echo", f"result {i} " + "r" * size, id=f"t{i}"),
            make_assistant(kind, f"answer {i}", id=f"b{i}"),
        ]
    return msgs


def _agent(kind: MessageKind, middlewares: Sequence[Any], turns: Any = ("done",)) -> Agent:
    return Agent(ScriptedChatModel(list(turns)), kind=kind, tools=[echo], middlewares=middlewares)


def _summaries(agent: Agent) -> list[Message]:
    return [m for m in agent.state.context if (m.metadata or {}).get(SUMMARY_METADATA_KEY)]


def _prompt_text(prompt: Sequence[Message]) -> str:
    return text_of(prompt[-1])


def test_the_docs_page_lists_every_parameter() -> None:
    page = Path(__file__).parents[3] / "docs" / "middleware" / "summarization.md"
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", page.read_text(), flags=re.M))
    assert documented == set(inspect.signature(SummarizationMiddleware).parameters)


# --- construction and triggers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs a trigger"),
        ({"max_tokens": None, "max_messages": None}, "needs a trigger"),
        ({"max_tokens": 0}, "max_tokens must be an int >= 1"),
        ({"max_messages": -3}, "max_messages must be an int >= 1"),
        ({"max_messages": True}, "max_messages must be an int >= 1"),
        ({"max_messages": 5, "model": "gpt"}, "model must be a ChatModel"),
        ({"max_messages": 5, "instruction": " "}, "instruction must be a non-empty string"),
        ({"max_messages": 5, "keep_user_tokens": -1}, "keep_user_tokens must be"),
        ({"max_messages": 5, "summarizer_max_tokens": 100}, "summarizer_max_tokens must be"),
        (
            {"max_messages": 5, "summarizer_max_tokens": 300, "instruction": "x" * 2000},
            "four times the instruction",
        ),
        ({"max_messages": 5, "retry": {"max_attempts": 0}}, "max_attempts must be at least 1"),
        ({"max_messages": 5, "retry": {"tries": 2}}, "unknown retry setting"),
        ({"max_messages": 5, "failure_mode": "closed"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SummarizationMiddleware(**kwargs)


def test_defaults_and_independent_triggers() -> None:
    only_messages = SummarizationMiddleware(max_messages=10)
    assert only_messages.max_tokens is None  # the anchor's bug made this 0
    only_tokens = SummarizationMiddleware(max_tokens=1000)
    assert only_tokens.max_messages is None
    assert (only_tokens.keep_user_tokens, only_tokens.summarizer_max_tokens) == (2_000, 100_000)
    assert (only_tokens.retry, only_tokens.failure_mode) == (RetryPolicy(), "fail_closed")
    assert only_tokens.model is None and only_tokens.instruction == DEFAULT_INSTRUCTION


async def test_only_the_message_trigger_ignores_a_huge_token_count(
    kind: MessageKind, attach: Attach
) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_messages=20, model=summariser.model)
    agent = _agent(kind, [await attach(mw)], turns=["done", "done"])
    agent.state.context.extend(_history(kind, steps=2, size=50_000))  # 9 messages, ~25k tokens
    await collect(agent.reply("go"))
    assert summariser.prompts == [] and _summaries(agent) == []
    agent.state.context.extend(_history(kind, steps=3, size=10)[1:])  # now 23 messages
    events = await collect(agent.reply("more"))
    assert len(summariser.prompts) == 1 and len(_summaries(agent)) == 1
    assert [e.name for e in customs(events)] == [SUMMARY_EVENT]


async def test_only_the_token_trigger_ignores_a_long_message_count(
    kind: MessageKind, attach: Attach
) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_tokens=2_000, model=summariser.model)
    agent = _agent(kind, [await attach(mw)], turns=["done", "done"])
    agent.state.context.extend(_history(kind, steps=30, size=0))  # 121 short messages
    assert estimate_tokens(agent.state.context) < 2_000
    await collect(agent.reply("go"))
    assert summariser.prompts == [] and _summaries(agent) == []
    agent.state.context.append(make_user_text(kind, "z" * 10_000))
    await collect(agent.reply("more"))
    assert len(summariser.prompts) == 1 and len(_summaries(agent)) == 1


# --- the summary ------------------------------------------------------------------------------


async def test_history_becomes_one_summary_and_recent_user_turns(
    kind: MessageKind, attach: Attach
) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_messages=8, keep_user_tokens=13, model=summariser.model)
    agent = _agent(kind, [await attach(mw)])
    agent.state.context.extend(_history(kind, steps=2))
    events = await collect(agent.reply("latest question"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    context = agent.state.context
    # Leading system kept, one summary, then the user turns that fit 13 tokens, then the reply.
    assert context[0].id == "sys"
    summary = context[1]
    assert summary.role == "user" and summary.metadata == {SUMMARY_METADATA_KEY: True}
    assert text_of(summary) == SUMMARY_PREFIX + "SUMMARY-1"
    kept = [text_of(m) for m in context[2:-1]]
    assert kept == ["question 1", "latest question"]
    assert context[2].id == "u1"
    assert text_of(context[-1]) == "done"
    # The summariser saw the whole history, rendered the same way for both kinds.
    [prompt] = summariser.prompts
    assert text_of(prompt[0]) == DEFAULT_INSTRUCTION and is_system(prompt[0])
    transcript = _prompt_text(prompt)
    for part in (
        "[user] question 0",
        '[assistant called echo (call c0)] {"text": "x"}',
        "[result of echo (call c0, success)] result 0 ",
        "[assistant] answer 1",
        "[user] latest question",
    ):
        assert part in transcript
    assert "be brief" not in transcript
    assert summariser.choices == [([], "none")]
    [event] = [e for e in customs(events) if e.name == SUMMARY_EVENT]
    assert event.value["summarized_messages"] == 9 and event.value["kept_messages"] == 2
    assert event.value["model_calls"] == 1


async def test_the_agent_model_summarises_by_default_in_process(kind: MessageKind) -> None:
    asked: list[Any] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        if text_of(messages[0]) == "summarise!":
            asked.append(tool_choice)
            return ScriptedTurn(text="it was all fine")
        return ScriptedTurn(text="done")

    mw = SummarizationMiddleware(max_messages=3, instruction="summarise!")
    agent = Agent(ScriptedChatModel(script), kind=kind, middlewares=[mw])
    agent.state.context.extend(_history(kind, steps=1))
    await collect(agent.reply("go"))
    assert asked == ["none"]
    assert text_of(_summaries(agent)[0]).endswith("it was all fine")


async def test_without_a_model_a_sidecar_fails_clearly(kind: MessageKind, attach: Attach) -> None:
    mw = SummarizationMiddleware(max_messages=3)
    agent = _agent(kind, [await attach(mw)], turns=["the summary", "done"])
    agent.state.context.extend(_history(kind, steps=1))
    events = await collect(agent.reply("go"))
    end = events[-1]
    if getattr(attach, "__name__", "") == "local":
        # In process the agent's own model is the default summariser.
        assert end.finish_reason == "completed"  # type: ignore[union-attr]
        assert text_of(_summaries(agent)[0]) == SUMMARY_PREFIX + "the summary"
        return
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error.reason == "MIDDLEWARE_FAILED"  # type: ignore[union-attr]
    assert "pass model=" in end.error.message  # type: ignore[union-attr]
    assert _summaries(agent) == []


async def test_a_streaming_summariser_is_joined(kind: MessageKind, attach: Attach) -> None:
    summariser = Summariser(stream=True, answer="a summary streamed in chunks")
    mw = SummarizationMiddleware(max_messages=3, model=summariser.model)
    agent = _agent(kind, [await attach(mw)])
    agent.state.context.extend(_history(kind, steps=1))
    await collect(agent.reply("go"))
    assert text_of(_summaries(agent)[0]) == SUMMARY_PREFIX + "a summary streamed in chunks"


async def test_a_second_summary_folds_in_the_first(kind: MessageKind, attach: Attach) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_messages=6, keep_user_tokens=0, model=summariser.model)
    agent = _agent(kind, [await attach(mw)], turns=["one", "two", "three"])
    agent.state.context.extend(_history(kind, steps=2))
    await collect(agent.reply("go"))
    agent.state.context.extend(_history(kind, steps=1)[1:])
    await collect(agent.reply("again"))
    assert len(summariser.prompts) == 2
    assert "[summary] " + SUMMARY_PREFIX + "SUMMARY-1" in _prompt_text(summariser.prompts[1])
    assert [text_of(m) for m in _summaries(agent)] == [SUMMARY_PREFIX + "SUMMARY-2"]


async def test_nothing_happens_when_only_keepable_turns_are_left(kind: MessageKind) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_tokens=50, keep_user_tokens=100, model=summariser.model)
    agent = _agent(kind, [mw])
    # Over the token trigger, but the lone user turn would be kept as it is.
    await collect(agent.reply("w" * 160))
    assert summariser.prompts == []


async def test_a_lone_summary_is_never_summarised_again(kind: MessageKind, attach: Attach) -> None:
    summariser = Summariser()
    # Three system messages leave no room under max_messages=3, so the context is still over
    # the trigger after the summary: the inner instance must not re-summarise the summary.
    outer, inner = (
        SummarizationMiddleware(max_messages=3, model=summariser.model) for _ in range(2)
    )
    agent = _agent(kind, [await attach(outer), await attach(inner)])
    systems = [make_text(kind, "system", f"rule {i}", id=f"s{i}") for i in range(3)]
    agent.state.context.extend([*systems, *_history(kind, steps=1)[1:]])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert len(summariser.prompts) == 1
    assert [m.id for m in agent.state.context[:3]] == ["s0", "s1", "s2"]
    assert len(_summaries(agent)) == 1 and len(agent.state.context) == 5


# --- orphan safety ----------------------------------------------------------------------------


async def test_the_kept_tail_never_holds_an_orphan_tool_result(
    kind: MessageKind, attach: Attach
) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_messages=10, keep_user_tokens=1_000, model=summariser.model)
    agent = _agent(kind, [await attach(mw)])
    history = _history(kind, steps=2)
    call = ToolCall(id="late", name="echo", arguments="{}")
    history.append(make_assistant(kind, "", [call], id="late-call"))
    if kind == "agentic":
        # The user's own text shares a message with the tool result: a user turn (is_user)
        # that still carries a result, so keeping it would orphan the result.
        history.append(
            AgenticMessage(
                id="mixed",
                role="user",
                blocks=[
                    ToolResultBlock(call_id="late", name="echo", output=[TextBlock(text="ok")]),
                    TextBlock(text="and now stop"),
                ],
            )
        )
    else:
        history.append(make_tool_result(kind, "late", "echo", "ok", id="late-result"))
        history.append(make_user_text(kind, "and now stop", id="mixed"))
    agent.state.context.extend(history)
    events = await collect(agent.reply("final"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    context = agent.state.context
    summary_at = next(i for i, m in enumerate(context) if m in _summaries(agent))
    tail = context[summary_at + 1 :]
    assert all(not tool_results(m) for m in tail)
    assert all(not tool_calls(m) for m in tail)
    assert unanswered_tool_calls(context) == []
    kept_ids = [m.id for m in tail[:-1]]
    assert "mixed" not in kept_ids if kind == "agentic" else "mixed" in kept_ids
    assert "and now stop" in _prompt_text(summariser.prompts[0])


# --- chunks, retries, failure modes -----------------------------------------------------------


async def test_a_long_history_is_summarised_in_bounded_chunks(
    kind: MessageKind, attach: Attach
) -> None:
    summariser = Summariser()
    bound = 600
    mw = SummarizationMiddleware(
        max_messages=5, summarizer_max_tokens=bound, keep_user_tokens=0, model=summariser.model
    )
    agent = _agent(kind, [await attach(mw)])
    agent.state.context.extend(_history(kind, steps=6, size=700))  # ~1,200 tokens of history
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    prompts = summariser.prompts
    assert len(prompts) >= 3
    assert all(estimate_tokens(p) <= bound for p in prompts)
    assert "SUMMARY-1" not in _prompt_text(prompts[0])
    for i in range(1, len(prompts)):
        assert f"SUMMARY-{i}" in _prompt_text(prompts[i])
    # Every part of the history reached the summariser once.
    seen = "".join(_prompt_text(p) for p in prompts)
    for i in range(6):
        assert seen.count(f"result {i} ") == 1
    assert text_of(_summaries(agent)[0]) == SUMMARY_PREFIX + f"SUMMARY-{len(prompts)}"
    [event] = [e for e in customs(events) if e.name == SUMMARY_EVENT]
    assert event.value["model_calls"] == len(prompts)


async def test_a_failing_summariser_is_retried(kind: MessageKind, attach: Attach) -> None:
    summariser = Summariser(fail=2)
    mw = SummarizationMiddleware(max_messages=3, retry=NO_WAIT, model=summariser.model)
    agent = _agent(kind, [await attach(mw)])
    agent.state.context.extend(_history(kind, steps=1))
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert len(summariser.prompts) == 3
    assert text_of(_summaries(agent)[0]) == SUMMARY_PREFIX + "SUMMARY-3"


@pytest.mark.parametrize("failure_mode", ["fail_closed", "fail_open"])
async def test_after_the_retries_the_failure_mode_decides(
    kind: MessageKind, attach: Attach, failure_mode: Any
) -> None:
    summariser = Summariser(fail=99)
    mw = SummarizationMiddleware(
        max_messages=3,
        retry={**NO_WAIT, "max_attempts": 2},
        model=summariser.model,
        failure_mode=failure_mode,
    )
    agent = _agent(kind, [await attach(mw)])
    history = _history(kind, steps=1)
    agent.state.context.extend(history)
    events = await collect(agent.reply("go"))
    assert len(summariser.prompts) == 2
    assert _summaries(agent) == []
    end = events[-1]
    if failure_mode == "fail_closed":
        assert end.finish_reason == "error"  # type: ignore[union-attr]
        assert end.error.reason == "MIDDLEWARE_FAILED"  # type: ignore[union-attr]
        assert end.error.source == "middleware:summarization"  # type: ignore[union-attr]
        assert "failed 2 times" in end.error.message  # type: ignore[union-attr]
        assert "summariser down (2)" in end.error.message  # type: ignore[union-attr]
    else:
        assert end.finish_reason == "completed"  # type: ignore[union-attr]
        # Untouched: the whole history is still there, then the reply.
        assert [m.id for m in agent.state.context][: len(history)] == [m.id for m in history]
        assert text_of(agent.state.context[-1]) == "done"


async def test_state_counts_summaries_per_reply(kind: MessageKind) -> None:
    summariser = Summariser()
    mw = SummarizationMiddleware(max_messages=3, model=summariser.model)
    seen: list[dict[str, Any]] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        seen.append(dict(mw.state(agent)))
        return ScriptedTurn(text="done")

    agent = Agent(ScriptedChatModel(script), kind=kind, middlewares=[mw])
    agent.state.context.extend(_history(kind, steps=1))
    await collect(agent.reply("go"))
    assert seen == [{"summaries": 1}]
    assert agent.state.middle_context == {"summarization": {}}
