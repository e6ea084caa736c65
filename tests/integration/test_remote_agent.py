"""RemoteAgentMiddleware against `hookmesh serve a2a`: a remote agent as a tool with its progress
as nested events, its input-required pausing this reply, and two hookmesh agents delegating to
each other over A2A on both message kinds."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from hookmesh.a2a import data_of_parts
from hookmesh.agent import Agent, Confirmation, Resume
from hookmesh.client import AgentClient
from hookmesh.middleware.builtin.remote_agent import (
    RemoteAgentMiddleware,
    RemoteAgentUnavailableError,
)
from hookmesh.schema import AgentEvent, MessageKind
from tests.a2a_stack import A2AStack, a2a_stack, delegating
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls, documented_parameters, parameters, results
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(90)
WAIT = 30.0


@pytest.fixture
async def desk(tmp_path: Path) -> AsyncIterator[A2AStack]:
    """The weather desk (the gateway tests' scripted agent) behind `hookmesh serve a2a`."""
    async with a2a_stack(tmp_path) as stack:
        yield stack


def nested(events: list[AgentEvent], depth: int = 1) -> list[AgentEvent]:
    return [e for e in events if e.source_path and len(e.source_path) == depth]


async def test_a_remote_agent_is_a_tool_with_nested_progress(
    kind: MessageKind, attach: Attach, desk: A2AStack
) -> None:
    async with RemoteAgentMiddleware([{"name": "desk", "url": desk.url}]) as mw:
        (tool, *_) = mw.list_tools()
        assert tool.name == "desk" and "weather-desk" in tool.description
        assert "get_weather" in tool.description  # the card's skills
        rec = Recorded(calls([("desk", {"message": "what is the weather"})], answer="Snowing."))
        agent = Agent(rec.model, middlewares=[await attach(mw)], kind=kind)
        events = await collect(agent.reply("weather?"), timeout=WAIT)
        assert events[-1].finish_reason == "completed"
        assert "desk__input" not in rec.tools[0]  # the pause tool is hidden from the model
        assert results(agent)["call_1"].text == "The tool said: -3 °C, snow"
        inner = nested(events)
        assert inner, "the remote reply's events are forwarded"
        step = inner[0].source_path[0]  # type: ignore[index]
        assert (step.call_id, step.tool_name, step.agent_name) == ("call_1", "desk", "weather-desk")
        assert step.run_id  # the remote task id
        types = [e.type for e in inner]
        assert types[0] == "reply_start" and "tool_result_end" in types
        assert all(e.reply_id == agent.reply_id for e in inner)
        own_end = [e for e in events if e.type == "reply_end" and not e.source_path]
        assert len(own_end) == 1


async def test_a_remote_confirmation_pauses_this_reply_as_its_own(
    kind: MessageKind, desk: A2AStack
) -> None:
    async with RemoteAgentMiddleware([{"name": "desk", "url": desk.url}]) as mw:
        rec = Recorded(calls([("desk", {"message": "delete my notes"})], answer="All done."))
        agent = Agent(rec.model, middlewares=[mw], kind=kind)
        events = await collect(agent.reply("clean up"), timeout=WAIT)
        assert events[-1].finish_reason == "awaiting_confirmation"
        (pause,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
        (ask,) = pause.tool_calls
        assert ask.name == "desk__confirm"
        arguments = json.loads(ask.arguments)
        assert arguments["path"] == ["weather-desk"]
        assert [c["name"] for c in arguments["tool_calls"]] == ["delete_file"]
        # The remote agent's own ask streams nested, with the path to it.
        (deep,) = [e for e in nested(events) if e.type == "require_user_confirm"]
        assert deep.source_path[0].agent_name == "weather-desk"  # type: ignore[index]
        assert len(rec.prompts) == 1  # the model was not asked to make that call
        resume = Resume(confirmations=[Confirmation(call_id=ask.id, confirmed=True)])
        events = await collect(agent.resume(resume), timeout=WAIT)
        assert events[-1].finish_reason == "completed"
        assert results(agent)[ask.id].text == "The tool said: deleted notes.txt"
        assert len(rec.prompts) == 2 and "desk__confirm" not in rec.tools[1]


async def test_rejecting_a_remote_confirmation_tells_the_remote_task(
    kind: MessageKind, desk: A2AStack
) -> None:
    async with RemoteAgentMiddleware([{"name": "desk", "url": desk.url}]) as mw:
        rec = Recorded(calls([("desk", {"message": "delete my notes"})], answer="Left alone."))
        agent = Agent(rec.model, middlewares=[mw], kind=kind)
        events = await collect(agent.reply("clean up"), timeout=WAIT)
        (pause,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
        no = Confirmation(call_id=pause.tool_calls[0].id, confirmed=False, reason="keep them")
        events = await collect(agent.resume(Resume(confirmations=[no])), timeout=WAIT)
        assert events[-1].finish_reason == "completed"
        answers = [r for r in results(agent).values() if r.name == "desk"]
        assert "keep them" in answers[-1].text  # the remote agent's answer to the denial
        assert "deleted" not in answers[-1].text


async def test_through_a_sidecar_input_required_is_the_result(
    kind: MessageKind, desk: A2AStack
) -> None:
    from hookmesh.remote import RemoteMiddleware, serve_middleware

    async with RemoteAgentMiddleware([{"name": "desk", "url": desk.url}]) as mw:
        running = await serve_middleware(mw)
        remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=10.0)
        try:
            rec = Recorded(calls([("desk", {"message": "delete my notes"})], answer="Asked."))
            agent = Agent(rec.model, middlewares=[remote], kind=kind)
            events = await collect(agent.reply("clean up"), timeout=WAIT)
            assert events[-1].finish_reason == "completed"
            result = results(agent)["call_1"]
            assert result.text.startswith("The remote agent desk asks the user: Confirm")
            assert [t for t in rec.tools[0] if t.startswith("desk")] == ["desk"]
        finally:
            await remote.aclose()
            await running.stop(None)


async def test_a_failed_remote_task_is_an_error_result(desk: A2AStack) -> None:
    async with RemoteAgentMiddleware([{"name": "desk", "url": desk.url}]) as mw:
        rec = Recorded(calls([("desk", {"message": "fail please"})]))
        agent = Agent(rec.model, middlewares=[mw])
        await collect(agent.reply("go"), timeout=WAIT)
        result = results(agent)["call_1"]
        assert result.state == "error" and "ended with failed" in result.text
        assert "the model is out of order" in result.text


async def test_an_unreachable_agent_fails_closed_or_is_left_out() -> None:
    agents = [{"name": "gone", "url": "http://127.0.0.1:9", "timeout": 5}]
    with pytest.raises(RemoteAgentUnavailableError) as info:
        await RemoteAgentMiddleware(agents).start()
    assert info.value.reason == "REMOTE_AGENT_UNAVAILABLE"
    async with RemoteAgentMiddleware(agents, failure_mode="fail_open") as mw:
        assert mw.list_tools() == []


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("remote_agent.md") == parameters(RemoteAgentMiddleware)


# --- two hookmesh agents over A2A ---------------------------------------------------------


async def pair(tmp_path: Path, kind: MessageKind) -> AsyncIterator[tuple[A2AStack, A2AStack]]:
    """Agent `a` (with the weather tool) and agent `b` (without), each behind its A2A server,
    each with a remote agent middleware calling the other (b's through its config, a's added
    once b's server is up)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with a2a_stack(
        tmp_path / "a", {"agent": {"name": "a", "kind": kind}}, model=delegating("b")
    ) as a:
        remote_a = {
            "type": "local",
            "import": "hookmesh.middleware.builtin.remote_agent:RemoteAgentMiddleware",
            "params": {"agents": [{"name": "a", "url": a.url}]},
        }
        b_config = {
            "agent": {"name": "b", "kind": kind},
            "tools": ["tests.service_tools:delete_file"],
            "middlewares": [remote_a],
        }
        async with (
            a2a_stack(tmp_path / "b", b_config, model=delegating("a")) as b,
            RemoteAgentMiddleware([{"name": "b", "url": b.url}]) as to_b,
        ):
            a.agent.servicer.chain.middlewares.append(to_b)
            yield a, b


@pytest.fixture
async def agents(tmp_path: Path, kind: MessageKind) -> AsyncIterator[tuple[A2AStack, A2AStack]]:
    async for both in pair(tmp_path, kind):
        yield both


async def test_two_agents_delegate_to_each_other(agents: tuple[A2AStack, A2AStack]) -> None:
    a, _ = agents
    async with AgentClient(f"127.0.0.1:{a.agent.port}", timeout=WAIT) as client:
        events = [e async for e in client.reply("ask b about the weather", session_id="s1")]
    assert events[-1].type == "reply_end" and events[-1].finish_reason == "completed"
    answer = "".join(e.delta for e in events if e.type == "text_block_delta" and not e.source_path)
    assert answer == "b says: a says: The tool said: -3 °C, snow"
    deep = [e for e in nested(events, 2) if e.type == "tool_result_end"]
    assert deep, "a's own work for b arrives two levels down"
    outer, inner = deep[0].source_path  # type: ignore[misc]
    assert (outer.tool_name, outer.agent_name) == ("b", "b")
    assert (inner.tool_name, inner.agent_name) == ("a", "a")


async def test_input_required_travels_up_the_chain_and_back(
    agents: tuple[A2AStack, A2AStack],
) -> None:
    a, _ = agents
    client = await create_client(a.url, client_config=ClientConfig())
    try:
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text="ask b delete my notes")],
        )
        async with asyncio.timeout(WAIT):
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
        final = events[-1].status_update.status
        assert final.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (pending,) = data_of_parts(final.message.parts)
        assert pending["awaiting"] == "confirmation"
        (call,) = pending["tool_calls"]
        assert call["name"] == "b__confirm" and call["arguments"]["path"] == ["b"]
        task = events[0].task
        answer = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text="yes")],
            task_id=task.id,
            context_id=task.context_id,
        )
        async with asyncio.timeout(WAIT):
            events = [e async for e in client.send_message(SendMessageRequest(message=answer))]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        artifact = next(e.artifact_update.artifact for e in events if e.HasField("artifact_update"))
        assert artifact.parts[0].text == "b says: The tool said: deleted notes.txt"
    finally:
        await client.close()
