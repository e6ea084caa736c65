"""A sidecar replaced at the same address (a pod restarted with a new version) is described
again on the new connection: replies that start after it use the new description, only the
invocations in flight when the old one died are affected, the first replies after its
return do not fail, and while a fail_open sidecar is down its tools are not offered."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import AgentEvent, Message, ReplyEndEvent
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)

DEADLINE = 3.0
"""The message deadline: longer than the channel's longest reconnect back-off (1 s)."""
LOAD = 20
"""Concurrent replies."""


def _agent(remote: RemoteMiddleware, model: Any = None) -> Agent:
    return Agent(model or ScriptedChatModel(["fine"]), middlewares=[remote])


async def _replies(remote: RemoteMiddleware, n: int = LOAD) -> list[list[AgentEvent]]:
    return list(await asyncio.gather(*(collect(_agent(remote).reply("hi")) for _ in range(n))))


def _completed(events: list[AgentEvent]) -> None:
    """The reply completed (a read-only watcher's report may follow its reply_end)."""
    [end] = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert end.finish_reason == "completed", end.error


def _reports(events: list[AgentEvent]) -> list[str]:
    return [e.name for e in customs(events) if e.name.startswith("report:")]


async def test_a_sidecar_replaced_at_its_address_is_described_again_with_no_failed_reply() -> None:
    async with sidecar_process("tests.remote_middlewares:Staller") as old:
        remote = await RemoteMiddleware.connect(
            old.address, timeout=DEADLINE, failure_mode="fail_closed"
        )
        try:
            stalled = asyncio.create_task(collect(_agent(remote).reply("stall")))
            assert await old.line() == "entered"
            for events in await _replies(remote):
                _completed(events)
                assert _reports(events) == ["report:Staller"]
            await old.kill()
            # Only the invocation in flight when the sidecar went is affected.
            cut = await stalled
            assert cut[-1].error.reason == "SIDECAR_UNAVAILABLE"  # type: ignore[union-attr]
            async with sidecar_process("tests.remote_middlewares:Watcher", listen=old.address):
                # Replies sent at once after its return wait for it instead of failing.
                for events in await _replies(remote):
                    _completed(events)
                    assert "report:Staller" not in _reports(events)
                # The new description is used: its key, its hooks.
                assert remote.middleware_key() == "Watcher"
                assert not remote.implements("on_reasoning")
                for events in await _replies(remote):
                    _completed(events)
                    assert _reports(events) == ["report:Watcher"]
        finally:
            await remote.aclose()


async def _left_ready(remote: RemoteMiddleware) -> None:
    """Until the sidecar's channel has seen its connection go (the kill's reset)."""
    channel = remote.link.channel
    async with asyncio.timeout(SHORT_TIMEOUT):
        while (state := channel.get_state()) is grpc.ChannelConnectivity.READY:
            await channel.wait_for_state_change(state)


async def test_a_down_fail_open_sidecars_tools_are_withdrawn_and_no_address_leaks() -> None:
    offered: list[list[str]] = []

    def calls_shout(
        messages: Sequence[Message], tools: Sequence[dict[str, Any]], choice: Any
    ) -> ScriptedTurn:
        names = [t["name"] for t in tools]
        offered.append(names)
        if "shout" in names and messages[-1].role == "user":
            return ScriptedTurn(tool_calls=[("shout", {"text": "hey"})])
        return ScriptedTurn("done")

    async with sidecar_process("tests.middlewares:ToolGiver") as sidecar:
        remote = await RemoteMiddleware.connect(
            sidecar.address, timeout=DEADLINE, failure_mode="fail_open"
        )
        try:
            await collect(_agent(remote, ScriptedChatModel(calls_shout)).reply("go"))
            assert offered[0] == ["shout"]
            # An agent built while the sidecar was up offers the tool, and the sidecar dies
            # while the call runs. SIGSTOP first keeps its connection up, so the tool is
            # offered for certain (a kill alone races the channel watcher, which may withdraw
            # the tool before the model is asked); it is killed once the call has started.
            before = _agent(remote, ScriptedChatModel(calls_shout))
            os.kill(sidecar.pid, signal.SIGSTOP)
            events = []
            async with asyncio.timeout(SHORT_TIMEOUT):
                async for event in before.reply("go"):
                    events.append(event)
                    if event.type == "tool_result_start":
                        await sidecar.kill()
            await _left_ready(remote)
            assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
            shown = str([e.model_dump() for e in events])
            assert "SIDECAR_UNAVAILABLE" in shown or "did not come back" in shown
            assert sidecar.address not in shown
            assert sidecar.address not in str(before.state.context)
            # Now it is known down: the model is not offered its tool.
            offered.clear()
            await collect(_agent(remote, ScriptedChatModel(calls_shout)).reply("go"))
            assert offered == [[]]
            async with sidecar_process("tests.middlewares:ToolGiver", listen=sidecar.address):
                await remote.wait_ready(SHORT_TIMEOUT)
                offered.clear()
                await collect(_agent(remote, ScriptedChatModel(calls_shout)).reply("go"))
                assert offered[0] == ["shout"]
        finally:
            await remote.aclose()
