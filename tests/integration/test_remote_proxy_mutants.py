"""The agent's side of a sidecar (RemoteMiddleware) where the mutation run found gaps: what
it takes from Describe, when it is ready, and what it sends in each hook's arguments."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import FailureMode, Middleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import (
    SERVICE_NAME,
    BreakerSettings,
    RemoteMiddleware,
    SidecarError,
)
from hookmesh.remote._codec import description_to_pb
from hookmesh.schema import AgentEvent, CustomEvent
from hookmesh.v1 import middleware_pb2 as pb
from tests import middlewares as mws
from tests import remote_middlewares as rmws
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs, echo, report
from tests.middlewares import Reporting
from tests.scripted_sidecar import ScriptedSidecar, describe, serve_scripted
from tests.served_middleware import Serve

pytestmark = pytest.mark.timeout(60)


async def test_the_description_taken_is_the_sidecars_with_the_configured_failure_mode(
    serve: Serve,
) -> None:
    running, remote = await serve(mws.ToolGiver(), failure_mode="fail_open")
    sent = running.servicers[SERVICE_NAME].description
    # Map entries (a tool schema's) serialize in any order unless asked to sort them.
    digest = hashlib.sha256(sent.SerializeToString(deterministic=True)).hexdigest()
    assert remote.description_hash == digest
    assert remote.describe().failure_mode == remote.failure_mode == "fail_open"
    assert remote.middleware_key() == mws.ToolGiver().middleware_key()
    assert [t.name for t in remote.list_tools()] == ["shout"]
    assert remote.described_now and remote.serving


@pytest.mark.parametrize("version", [0, 2])
async def test_a_sidecar_speaking_another_protocol_version_is_refused_at_connect(
    version: int,
) -> None:
    description = describe(pb.HOOK_ON_REASONING)
    description.protocol_version = version
    running = await serve_scripted(ScriptedSidecar(description))
    try:
        with pytest.raises(SidecarError) as caught:
            await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT)
    finally:
        await running.stop(None)
    assert caught.value.reason == "SIDECAR_PROTOCOL_ERROR"
    assert f"speaks protocol {version}, not 1" in str(caught.value)


async def test_a_new_description_is_logged_once_and_the_same_one_is_not(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    _, remote = await serve(mws.ToolGiver())
    with caplog.at_level(logging.WARNING, logger="hookmesh.remote"):
        remote._adopt(description_to_pb(mws.ToolGiver().describe(), [mws.shout], 0))
        assert "described itself anew" not in caplog.text
        remote._adopt(describe(pb.HOOK_ON_REASONING, key="other"))
    [line] = [r.getMessage() for r in caplog.records if "anew" in r.getMessage()]
    assert "(key other, hooks on_reasoning)" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hookmesh.remote"):
        remote._adopt(pb.DescribeResponse(protocol_version=1, middleware_key="bare"))
    [line] = [r.getMessage() for r in caplog.records if "anew" in r.getMessage()]
    assert "(key bare, hooks none)" in line
    assert remote.middleware_key() == "bare" and not remote.implements("on_reasoning")


async def _until_down(remote: RemoteMiddleware) -> None:
    """Wait for the channel to fail to connect (its server gone), on its state changes."""
    channel = remote.link.channel
    async with asyncio.timeout(SHORT_TIMEOUT):
        state = channel.get_state(try_to_connect=True)
        while state != grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            await channel.wait_for_state_change(state)
            state = channel.get_state(try_to_connect=True)


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_only_a_fail_open_sidecar_withdraws_its_tools_while_down(
    serve: Serve, mode: FailureMode
) -> None:
    # A mode read from a config file: equal to the literal, not the same object.
    running, remote = await serve(mws.ToolGiver(), failure_mode="".join(list(mode)))
    assert [t.name for t in remote.list_tools()] == ["shout"]
    await running.stop(None)
    await _until_down(remote)
    assert [t.name for t in remote.list_tools()] == ([] if mode == "fail_open" else ["shout"])
    assert not remote.serving


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_only_a_fail_open_sidecar_withdraws_its_tools_while_its_circuit_is_open(
    serve: Serve, mode: FailureMode
) -> None:
    _, remote = await serve(mws.ToolGiver(), failure_mode=mode, breaker=BreakerSettings(misses=1))
    remote.link.missed()  # one missed deadline opens this circuit
    assert remote.link.breaker.open and not remote.serving
    assert [t.name for t in remote.list_tools()] == ([] if mode == "fail_open" else ["shout"])


class ResumeProbe(Middleware):
    """Emits whether its on_reply was told the reply resumes a paused one."""

    async def on_reply(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        yield CustomEvent(
            reply_id=agent.reply_id, name="resume", value=kwargs["resume"] is not None
        )
        async for event in next_handler():
            yield event


async def test_a_fresh_reply_is_not_sent_as_a_resumed_one(serve: Serve) -> None:
    _, remote = await serve(ResumeProbe())
    agent = Agent(ScriptedChatModel(["hi"]), middlewares=[remote])
    events = await collect(agent.reply("go"))
    assert [e.value for e in customs(events) if e.name == "resume"] == [False]


class ModelCallProbe(Reporting):
    """Reports how many messages its on_model_call was given."""

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        self.state(agent)["messages"] = len(kwargs["messages"])
        return await next_handler()


class ContextModelCallProbe(ModelCallProbe):
    needs_context = True


@pytest.mark.parametrize("probe", [ModelCallProbe, ContextModelCallProbe])
async def test_a_model_call_carries_the_messages_only_to_a_sidecar_that_asks(
    serve: Serve, probe: type[ModelCallProbe]
) -> None:
    _, remote = await serve(probe())
    events = await collect(Agent(ScriptedChatModel(["hi"]), middlewares=[remote]).reply("go"))
    assert report(events, probe.__name__)["messages"] == (1 if probe.needs_context else 0)
    assert remote.link.calls == 2  # on_reply and on_model_call, each invoked once


async def test_a_sidecar_that_never_describes_itself_fails_the_call_at_its_deadline() -> None:
    with socket.socket() as held:  # a port nothing answers on while the test runs
        held.bind(("127.0.0.1", 0))
        remote = await RemoteMiddleware.connect(
            f"127.0.0.1:{held.getsockname()[1]}",
            failure_mode="fail_closed",
            timeout=0.3,
            wait=False,
            breaker=BreakerSettings(misses=1),
        )
        try:
            agent = Agent(ScriptedChatModel(["hi"]), middlewares=[remote])
            with pytest.raises(SidecarError) as caught:
                await remote.on_model_call(agent, {}, _never)  # type: ignore[arg-type]
            assert remote.link.breaker.open  # the missed deadline counted
        finally:
            await remote.aclose()
    assert caught.value.reason == "SIDECAR_UNAVAILABLE"
    assert caught.value.metadata["timeoutSeconds"] == "0.3"
    assert "did not come back within 0.3 s" in str(caught.value)


async def _never() -> Any:
    raise AssertionError("the downstream ran without the sidecar")


async def test_a_fresh_permission_check_and_compression_are_each_admitted_once(
    serve: Serve,
) -> None:
    _, remote = await serve(rmws.WatchesChecks("intercept"))
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done"]
    agent = Agent(ScriptedChatModel(turns), tools=[echo], middlewares=[remote])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert remote.link.calls == 3  # one permission check, a compression before each model call


async def test_a_refused_description_is_asked_for_again_by_the_next_wait() -> None:
    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_REASONING))
    running = await serve_scripted(sidecar)
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT)
    try:
        sidecar.description = pb.DescribeResponse(protocol_version=2, middleware_key="next")
        remote._stale()  # the connection went, as when the sidecar restarts
        with pytest.raises(SidecarError) as caught:
            await remote.wait_ready(SHORT_TIMEOUT)
        assert caught.value.reason == "SIDECAR_PROTOCOL_ERROR"
        assert not remote.described_now
        sidecar.description = describe(pb.HOOK_ON_REASONING, key="fixed")
        await remote.wait_ready(SHORT_TIMEOUT)
        assert remote.described_now and remote.middleware_key() == "fixed"
    finally:
        await remote.aclose()
        await running.stop(None)


class ChecksPermission(Middleware):
    """Only checks permissions (allowing every call)."""

    async def on_check_permission(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> Any:
        return await next_handler()


class CallsModel(Middleware):
    """Only wraps model calls."""

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler()


@pytest.mark.parametrize(
    ("make", "invocations"),
    [
        # A compression before each model call and one permission check.
        (lambda: rmws.WatchesChecks("intercept"), 3),
        (ChecksPermission, 1),
        (CallsModel, 2),
    ],
    ids=["compress-first", "permission-first", "model-call-first"],
)
async def test_the_first_calls_after_a_reconnect_still_go_to_the_sidecar(
    serve: Serve, make: Callable[[], Middleware], invocations: int
) -> None:
    running, remote = await serve(make())
    remote._stale()  # the connection went, as when the sidecar restarts
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done"]
    agent = Agent(ScriptedChatModel(turns), tools=[echo], middlewares=[remote])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert running.servicers[SERVICE_NAME].received["invocation"] == invocations


class CountsDescribes(ScriptedSidecar):
    """A scripted sidecar counting the Describe calls it answers."""

    describes = 0

    async def Describe(self, request: Any, context: Any) -> pb.DescribeResponse:
        self.describes += 1
        return await super().Describe(request, context)


async def test_a_call_waiting_for_a_describe_under_way_does_not_start_another() -> None:
    sidecar = CountsDescribes(describe(pb.HOOK_ON_REASONING))
    running = await serve_scripted(sidecar)
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT)
    try:
        remote._stale()  # the connection went: one Describe starts in the background
        await remote.wait_ready(SHORT_TIMEOUT)
        assert remote.described_now
        assert sidecar.describes == 2  # at connect, and once after the connection went
    finally:
        await remote.aclose()
        await running.stop(None)
