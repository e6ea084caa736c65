"""The memory middleware against a real memory service (both backends), and the suite's
scenario: a second session of the agent service recalls a fact learned in the first."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.client import AgentClient, MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.middleware.builtin.memory import MemoryMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, is_hint, make_user_text, text_of, tool_results
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import MemoryService, load_memory_config, start_memory_service
from tests.agent_helpers import collect
from tests.integration.memory.conftest import MemoryBackend

pytestmark = pytest.mark.timeout(90)
SHORT_TIMEOUT = 30.0
FACTS = json.dumps({"facts": ["The user is vegetarian."]})


@pytest.fixture
async def memory_service(backend: MemoryBackend) -> AsyncIterator[MemoryService]:
    """A memory service whose extraction model turns any turn into one fact."""
    config = load_memory_config(
        None, **backend.config(model={"type": "scripted", "turns": [FACTS], "stream": False})
    )
    service = await start_memory_service(config, address="127.0.0.1:0")
    try:
        yield service
    finally:
        await service.stop(None)


async def test_the_middleware_recalls_and_writes_through_the_service(
    kind: MessageKind, memory_service: MemoryService
) -> None:
    target = f"127.0.0.1:{memory_service.port}"
    seen: list[list[Message]] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append(list(messages))
        if len(seen) == 2:
            return ScriptedTurn(tool_calls=[("search_memory", {"query": "diet"})])
        return ScriptedTurn(text="Noted.")

    mw = MemoryMiddleware(target, user_id="alice", agent_id="chef", timeout=SHORT_TIMEOUT)
    try:
        first = Agent(ScriptedChatModel(script), kind=kind, middlewares=[mw], session_id="s1")
        await collect(first.reply("I stopped eating meat last year."), SHORT_TIMEOUT)
        assert not [m for m in seen[0] if is_hint(m)]
        second = Agent(ScriptedChatModel(script), kind=kind, middlewares=[mw], session_id="s2")
        msg = make_user_text(kind, "Any dinner ideas?")
        events = await collect(second.reply(msg), SHORT_TIMEOUT)
    finally:
        await mw.aclose()
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    [hint] = [text_of(m) for m in seen[1] if is_hint(m)]
    assert "- The user is vegetarian." in hint
    [result] = [r for m in second.state.context for r in tool_results(m)]
    assert result.text.startswith("1. The user is vegetarian.")
    async with MemoryClient(target, timeout=SHORT_TIMEOUT) as memory:
        [stored] = (await memory.list(MemoryScope("alice"))).memories
    # Both turns yielded the same fact: merged, with the sources of both replies.
    assert stored.scope == MemoryScope("alice", "chef", "s1") and stored.origin == "extracted"
    asked = next(m for m in second.state.context if text_of(m) == text_of(msg))
    assert asked.id in stored.source_message_ids and len(stored.source_message_ids) == 4


async def test_a_second_session_recalls_a_fact_from_the_first(
    memory_service: MemoryService, tmp_path: Path
) -> None:
    memory_target = f"127.0.0.1:{memory_service.port}"
    settings = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        models={"default": {"type": "scripted", "turns": ["Noted!", "How about a risotto?"]}},
        middlewares=[
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
                "params": {"target": memory_target, "user_id": "demo-user"},
            }
        ],
        grace_seconds=0.5,
    )
    agent = await start_agent_service(settings, address="127.0.0.1:0")
    try:
        async with AgentClient(f"127.0.0.1:{agent.port}", timeout=SHORT_TIMEOUT) as client:
            first = [e async for e in client.reply("By the way, I'm vegetarian.")]
            second = [e async for e in client.reply("What should I cook tonight?")]
    finally:
        await agent.stop(None)
    assert first[0].session_id != second[0].session_id  # type: ignore[union-attr]
    assert not [e for e in first if e.type == "hint_block"]
    [hint] = [e for e in second if e.type == "hint_block"]
    assert hint.source == "memory" and "The user is vegetarian." in hint.text  # type: ignore[union-attr]
    assert second[-1].finish_reason == "completed"  # type: ignore[union-attr]
