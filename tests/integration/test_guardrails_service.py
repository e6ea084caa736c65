"""Guardrails in the agent service over real gRPC, configured in process or served by a
sidecar: a trip ends the reply with GUARDRAIL_TRIPPED, and the session keeps what the docs
say (not the tripping input, not the tripped answer), so the next reply goes on cleanly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from hookmesh.client import AgentClient
from hookmesh.middleware.builtin.guardrails import LengthGuardrail, PatternGuardrail
from hookmesh.remote import serve_middleware
from hookmesh.schema import ReplyEndEvent, text_of
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from tests.agent_helpers import SHORT_TIMEOUT
from tests.servers import stopped_at_exit, target

pytestmark = pytest.mark.timeout(60)

Start = Callable[..., Awaitable[AgentService]]
GUARDS = {
    "input": (PatternGuardrail, {"deny": ["password"]}),
    "output": (LengthGuardrail, {"max_chars": 10, "stages": ["output"]}),
}


@pytest.fixture(params=["local", "sidecar"])
async def start(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Start]:
    """Agent services whose guardrail runs in process or in a sidecar on loopback."""
    sidecars: list[Any] = []

    async def run(stage: str, turns: list[Any]) -> AgentService:
        cls, params = GUARDS[stage]
        if request.param == "local":
            path = f"{cls.__module__.rsplit('.', 1)[0]}:{cls.__name__}"
            middleware: dict[str, Any] = {"type": "local", "import": path, "params": params}
        else:
            sidecar = await serve_middleware(cls(**params))
            sidecars.append(sidecar)
            middleware = {"type": "remote", "target": f"127.0.0.1:{sidecar.port}"}
        model = {"type": "scripted", "turns": turns}
        settings = load_config(
            None,
            store=f"sqlite:///{tmp_path}/agent.db",
            models={"default": model},
            middlewares=[middleware],
        )
        return await start_agent_service(settings, address="127.0.0.1:0")

    try:
        async with stopped_at_exit(run) as started:
            yield started
    finally:
        for sidecar in sidecars:
            await sidecar.stop(None)


async def _reply(client: AgentClient, text: str, session_id: str = "") -> ReplyEndEvent:
    events = [e async for e in client.reply(text, session_id=session_id)]
    assert events[0].type == "reply_start"
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end


async def test_a_tripped_input_is_not_kept_in_the_session(start: Start) -> None:
    service = await start("input", ["fine", "fine"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        end = await _reply(client, "my password is x")
        assert end.error is not None and end.error.reason == "GUARDRAIL_TRIPPED"
        assert end.error.metadata["guardrail"] == "pattern"
        session = await client.get_session(end.session_id)
        assert session.context == [] and session.status == "idle"
        end = await _reply(client, "hello", end.session_id)
        assert end.finish_reason == "completed"
        session = await client.get_session(end.session_id)
        assert [text_of(m) for m in session.context] == ["hello", "fine"]


async def test_a_tripped_answer_is_not_kept_in_the_session(start: Start) -> None:
    service = await start("output", ["an answer far too long", "short"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        end = await _reply(client, "hi")
        assert end.error is not None and end.error.reason == "GUARDRAIL_TRIPPED"
        assert end.error.metadata["stage"] == "output"
        session = await client.get_session(end.session_id)
        assert [text_of(m) for m in session.context] == ["hi"]
        end = await _reply(client, "again", end.session_id)
        assert end.finish_reason == "completed"
