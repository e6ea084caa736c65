"""The memory middleware on an in-process store: static and agent control, flat and agentic,
in process and via a sidecar; scopes, failures and background writes."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.memory import MemoryScope, MemoryStore, open_memory_store
from hookmesh.middleware.builtin.memory import (
    DEFAULT_PROMPT_NOTE,
    DEFAULT_RECALL_THRESHOLD,
    WARNING_EVENT,
    MemoryMiddleware,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    Message,
    MessageKind,
    is_hint,
    is_system,
    make_user_text,
    text_of,
    tool_results,
)
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs, echo
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

Seen = list[tuple[list[Message], list[str]]]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """An embedded memory store (SQLite, real embeddings, no extraction model)."""
    opened = await open_memory_store(f"sqlite:///{tmp_path}/memory.db")
    try:
        yield opened
    finally:
        await opened.close()


def answering(seen: Seen, *turns: ScriptedTurn) -> ScriptedChatModel:
    """A model playing `turns` (the last one again when they run out), recording each prompt
    and the tool names it was offered."""

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append((list(messages), [t["name"] for t in tools]))
        return turns[min(len(seen), len(turns)) - 1]

    return ScriptedChatModel(script)


def hint_texts(messages: Sequence[Message]) -> list[str]:
    return [text_of(m) for m in messages if is_hint(m)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_static_control_recalls_before_and_remembers_after(
    kind: MessageKind, attach: Attach, store: MemoryStore
) -> None:
    chef = MemoryScope("alice", "chef")
    await store.add(chef, facts=["The user is vegetarian.", "The user's son Tom is six."])
    await store.add(MemoryScope("bob", "chef"), facts=["The user loves steak."])
    seen: Seen = []
    mw = MemoryMiddleware(store=store, mode="static_control", user_id="alice", agent_id="chef")
    agent = Agent(
        answering(seen, ScriptedTurn(text="A mushroom risotto.")),
        kind=kind,
        middlewares=[await attach(mw)],
        session_id="s1",
    )
    events = await collect(agent.reply("What should I cook for dinner tonight?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    hints = [e for e in events if e.type == "hint_block"]
    assert len(hints) == 1 and hints[0].source == "memory"  # type: ignore[union-attr]
    assert "- The user is vegetarian." in hints[0].text  # type: ignore[union-attr]
    assert "steak" not in hints[0].text  # type: ignore[union-attr]
    prompt, tools = seen[0]
    assert hint_texts(prompt) == [hints[0].text] and tools == []  # type: ignore[union-attr]
    assert hint_texts(agent.state.context) == []
    # The turn went back (no extraction model): a question is not a statement to keep.
    assert (await store.list(MemoryScope("alice", "chef", "s1"))).memories == []
    assert agent.state.middle_context.get("memory", {}) == {}


async def test_the_recalled_facts_are_shown_at_every_step_and_the_turn_keeps_its_ids(
    kind: MessageKind, store: MemoryStore
) -> None:
    await store.add(MemoryScope("alice"), facts=["The user's favourite colour is green."])
    seen: Seen = []
    model = answering(
        seen,
        ScriptedTurn(tool_calls=[("echo", {"text": "green"})]),
        ScriptedTurn(text="Green it is."),
    )
    mw = MemoryMiddleware(store=store, mode="static_control", user_id="alice")
    agent = Agent(model, kind=kind, tools=[echo], middlewares=[mw])
    events = await collect(agent.reply("I am repainting my bedroom. Which colour suits it?"))
    assert len([e for e in events if e.type == "hint_block"]) == 1
    assert [len(hint_texts(prompt)) for prompt, _ in seen] == [1, 1]
    assert hint_texts(agent.state.context) == []
    [memory] = (await store.list(MemoryScope("alice"))).memories[1:]
    question = agent.state.context[0]
    assert (
        memory.source_message_ids == (question.id,) and memory.text == "I am repainting my bedroom."
    )


async def test_agent_control_adds_and_searches_with_tools(
    kind: MessageKind, attach: Attach, store: MemoryStore
) -> None:
    seen: Seen = []
    model = answering(
        seen,
        ScriptedTurn(tool_calls=[("add_memory", {"text": "The user plays the cello."})]),
        ScriptedTurn(tool_calls=[("search_memory", {"query": "musical instrument", "top_k": 3})]),
        ScriptedTurn(tool_calls=[("add_memory", {"text": "The user plays the cello!"})]),
        ScriptedTurn(text="Noted: you play the cello."),
    )
    mw = MemoryMiddleware(store=store, mode="agent_control", user_id="carol", agent_id="tutor")
    agent = Agent(
        model,
        kind=kind,
        system_prompt="You are a tutor.",
        middlewares=[await attach(mw)],
        session_id="s2",
    )
    events = await collect(agent.reply("I play the cello, by the way."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert not [e for e in events if e.type == "hint_block"]
    system = seen[0][0][0]
    assert is_system(system) and text_of(system).endswith(DEFAULT_PROMPT_NOTE)
    assert text_of(system).startswith("You are a tutor.")
    assert sorted(seen[0][1]) == ["add_memory", "search_memory"]
    results = [(r.name, r.state, r.text) for m in agent.state.context for r in tool_results(m)]
    assert [(name, state) for name, state, _ in results] == [
        ("add_memory", "success"),
        ("search_memory", "success"),
        ("add_memory", "success"),
    ]
    assert results[0][2].startswith("Remembered (memory ")
    assert results[1][2].startswith("1. The user plays the cello. (remembered ")
    assert results[2][2].startswith("Already remembered")
    [memory] = (await store.list(MemoryScope("carol"))).memories
    assert memory.scope == MemoryScope("carol", "tutor", "s2") and memory.origin == "fact"


async def test_the_request_names_the_user_and_without_one_memory_is_off(
    kind: MessageKind, store: MemoryStore
) -> None:
    await store.add(MemoryScope("alice"), facts=["The user is called Alice."])
    await store.add(MemoryScope("bob"), facts=["The user is called Bob."])
    seen: Seen = []
    model = answering(seen, ScriptedTurn(text="Hello!"))

    def ask(user: str | None) -> Message:
        msg = make_user_text(kind, "I am back. Do you remember what I am called?")
        msg.metadata = {"user_id": user} if user else None
        return msg

    trusting = MemoryMiddleware(
        store=store, mode="static_control", user_id="alice", scope_from_metadata=True
    )
    await collect(Agent(model, kind=kind, middlewares=[trusting]).reply(ask("bob")))
    assert "Bob" in hint_texts(seen[-1][0])[0]
    strict = MemoryMiddleware(store=store, mode="static_control", user_id="alice")
    await collect(Agent(model, kind=kind, middlewares=[strict]).reply(ask("bob")))
    assert "Alice" in hint_texts(seen[-1][0])[0]
    caller = Agent(model, kind=kind, middlewares=[strict], user_id="bob")
    await collect(caller.reply(ask(None)))
    assert "Bob" in hint_texts(seen[-1][0])[0]  # the authenticated user wins over user_id
    counts = [len((await store.list(MemoryScope(u))).memories) for u in ("alice", "bob")]
    assert counts == [2, 2]  # each reply wrote its turn back to its user (bob's twice: merged)
    nobody = MemoryMiddleware(store=store, mode="both")
    events = await collect(Agent(model, kind=kind, middlewares=[nobody]).reply(ask(None)))
    assert hint_texts(seen[-1][0]) == [] and not customs(events)
    assert [len((await store.list(MemoryScope(u))).memories) for u in ("alice", "bob")] == counts
    by_session = MemoryMiddleware(store=store, mode="static_control", session_as_user=True)
    agent = Agent(model, kind=kind, middlewares=[by_session], session_id="sess-9")
    await collect(agent.reply(ask(None)))
    assert [m.text for m in (await store.list(MemoryScope("sess-9"))).memories] == ["I am back."]


async def test_recall_skips_memories_unrelated_to_the_turn(
    kind: MessageKind, store: MemoryStore
) -> None:
    await store.add(MemoryScope("alice"), facts=["The user is vegetarian."])
    seen: Seen = []
    model = answering(seen, ScriptedTurn(text="Done."), ScriptedTurn(text="A risotto."))
    mw = MemoryMiddleware(store=store, mode="static_control", user_id="alice")
    assert mw.score_threshold == DEFAULT_RECALL_THRESHOLD
    await collect(Agent(model, kind=kind, middlewares=[mw]).reply("Book me a flight to Paris"))
    assert hint_texts(seen[-1][0]) == []
    await collect(Agent(model, kind=kind, middlewares=[mw]).reply("Any dinner ideas?"))
    [hint] = hint_texts(seen[-1][0])
    assert "- The user is vegetarian." in hint


async def test_one_instance_serves_concurrent_replies_of_different_users(
    kind: MessageKind, attach: Attach, store: MemoryStore
) -> None:
    pets = {"dana": "a tortoise", "eli": "a parrot", "fay": "two cats"}
    for user, pet in pets.items():
        await store.add(MemoryScope(user), facts=[f"The user has {pet}."])
    mw = await attach(MemoryMiddleware(store=store, mode="static_control"))
    seen: dict[str, list[str]] = {}

    def model_for(user: str) -> ScriptedChatModel:
        def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
            seen[user] = hint_texts(messages)
            return ScriptedTurn(text="ok")

        return ScriptedChatModel(script, stream=True, chunk_size=1)

    async def reply(user: str) -> None:
        msg = make_user_text(kind, "Which pets do I have?")
        agent = Agent(model_for(user), kind=kind, middlewares=[mw], user_id=user)
        await collect(agent.reply(msg))

    async with asyncio.timeout(SHORT_TIMEOUT):
        await asyncio.gather(*(reply(user) for user in pets))
    for user, pet in pets.items():
        [hint] = seen[user]
        assert pet in hint and all(other not in hint for other in pets.values() if other != pet)


async def test_an_unreachable_service_fails_open_by_default(kind: MessageKind) -> None:
    seen: Seen = []
    model = answering(
        seen,
        ScriptedTurn(tool_calls=[("search_memory", {"query": "anything"})]),
        ScriptedTurn(text="I could not check my memory."),
    )
    mw = MemoryMiddleware(target=f"127.0.0.1:{free_port()}", user_id="alice", timeout=5.0)
    try:
        agent = Agent(model, kind=kind, middlewares=[mw])
        events = await collect(agent.reply("What do you know about me?"))
    finally:
        await mw.aclose()
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    warnings = [e.value for e in customs(events) if e.name == WARNING_EVENT]
    assert [w["operation"] for w in warnings] == ["search", "write"]
    [result] = [r for m in agent.state.context for r in tool_results(m)]
    assert result.state == "error" and "memory is unavailable" in result.text


async def test_fail_closed_ends_the_reply_with_an_error(kind: MessageKind) -> None:
    mw = MemoryMiddleware(
        target=f"127.0.0.1:{free_port()}", user_id="alice", failure_mode="fail_closed"
    )
    try:
        model = answering([], ScriptedTurn(text="unreachable"))
        events = await collect(Agent(model, kind=kind, middlewares=[mw]).reply("Hi"))
    finally:
        await mw.aclose()
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    # The middleware's own reason reaches the client (as it would from a sidecar).
    assert end.error is not None and end.error.reason == "MEMORY_UNAVAILABLE"  # type: ignore[union-attr]
    assert end.error.source == "middleware:memory"  # type: ignore[union-attr]
    assert "memory search failed" in end.error.message  # type: ignore[union-attr]


async def test_a_fail_closed_tool_ends_the_reply_in_process_and_behind_a_sidecar(
    kind: MessageKind, attach: Attach
) -> None:
    mw = MemoryMiddleware(
        target=f"127.0.0.1:{free_port()}",
        mode="agent_control",
        user_id="alice",
        failure_mode="fail_closed",
    )
    seen: Seen = []
    model = answering(seen, ScriptedTurn(tool_calls=[("search_memory", {"query": "x"})]))
    try:
        events = await collect(Agent(model, kind=kind, middlewares=[await attach(mw)]).reply("Hi"))
    finally:
        await mw.aclose()
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error.reason == "MEMORY_UNAVAILABLE"  # type: ignore[union-attr]
    assert end.error.source == "middleware:memory"  # type: ignore[union-attr]
    assert "memory search failed" in end.error.message  # type: ignore[union-attr]
    assert len(seen) == 1  # the reply went no further than the call


async def test_background_writes_are_tracked_drained_and_never_leak(
    store: MemoryStore, tmp_path: Path
) -> None:
    mw = MemoryMiddleware(store=store, mode="static_control", user_id="gil", write="background")
    agent = Agent(answering([], ScriptedTurn(text="ok")), middlewares=[mw])
    await collect(agent.reply("I am moving to Berlin next spring."))
    await mw.drain(SHORT_TIMEOUT)
    assert mw.background_tasks == 0
    assert [m.text for m in (await store.list(MemoryScope("gil"))).memories] == [
        "I am moving to Berlin next spring."
    ]
    # An extraction model that takes 30 s: the write hangs until aclose cancels it; the
    # reply itself did not wait for it.
    slow = await open_memory_store(
        f"sqlite:///{tmp_path}/memory.db",
        model=ScriptedChatModel(['{"facts": []}'], stream=True, delay=30.0),
    )
    stuck = MemoryMiddleware(store=slow, mode="static_control", user_id="gil", write="background")
    try:
        agent = Agent(answering([], ScriptedTurn(text="ok")), middlewares=[stuck])
        events = await collect(agent.reply("Remember this"))
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert stuck.background_tasks == 1
        with pytest.raises(TimeoutError):
            await stuck.drain(0.05)
    finally:
        await stuck.aclose(timeout=0.05)
        await slow.close()
    assert stuck.background_tasks == 0


def test_bad_parameters_are_refused(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="one of them"):
        MemoryMiddleware()
    with pytest.raises(ValueError, match="one of them"):
        MemoryMiddleware("127.0.0.1:1", store=store)
    with pytest.raises(ValueError, match="mode"):
        MemoryMiddleware(store=store, mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memories"):
        MemoryMiddleware(store=store, hint_template="no placeholder")
    static = MemoryMiddleware(store=store, mode="static_control")
    assert static.list_tools() == [] and not static.implements("on_acting")
    assert static.implements("after_agent") and static.implements("on_reasoning")
    agentic = MemoryMiddleware(store=store, mode="agent_control")
    assert not agentic.implements("on_reasoning") and agentic.implements("on_system_prompt")
