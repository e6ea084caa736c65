"""A sidecar that hangs (SIGSTOP: its port still accepts, nothing answers) opens its circuit
after consecutive missed deadlines: then its calls fail at once (skipped under fail_open,
failing the reply under fail_closed) instead of each waiting out the deadline, the process's
health service and metrics say so, and a background probe closes it when the sidecar
answers again."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import BreakerSettings, RemoteMiddleware, SidecarError, serve_middleware
from hookmesh.remote._breaker import CircuitBreaker
from hookmesh.schema import AgentEvent, CustomEvent, MessageKind, ReplyEndEvent
from hookmesh.services.agent import load_config
from hookmesh.services.agent._chain import build_chain
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT, collect
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(60)

DEADLINE = 0.3
PROGRESS = 0.2
"""Seconds between a busy hook's progress messages (well within its 2 s deadline)."""
MISSES = 2
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _reply(kind: MessageKind, remote: RemoteMiddleware) -> ReplyEndEvent:
    agent = Agent(ScriptedChatModel(["fine"]), kind=kind, middlewares=[remote])
    events: list[AgentEvent] = await collect(agent.reply("hello"))
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end


def _reason(end: ReplyEndEvent, caplog: pytest.LogCaptureFixture, mode: str) -> str:
    """Why the sidecar's hook did not run in this reply ('' when it ran)."""
    if mode == "fail_closed":
        return end.error.reason if end.error is not None else ""
    assert end.finish_reason == "completed"
    skipped = [r for r in caplog.records if "skipped (fail_open)" in r.getMessage()]
    caplog.clear()
    if not skipped:
        return ""
    return "SIDECAR_CIRCUIT_OPEN" if "not called" in skipped[-1].getMessage() else "MISSED"


def _points(reader: Any, name: str, sidecar: str) -> list[Any]:
    found = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found += [
                        p
                        for p in metric.data.data_points
                        if p.attributes.get("hookmesh.sidecar") == sidecar
                    ]
    return found


@pytest.fixture
async def health() -> AsyncIterator[health_pb2_grpc.HealthStub]:
    """A gRPC server of this process: like every one, it answers for the sidecars its
    agents are linked to (``sidecar:<address>``)."""
    running = await serve_middleware(mws.ToolGiver())
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield health_pb2_grpc.HealthStub(channel)
    finally:
        await running.stop(None)


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_a_hung_sidecar_is_skipped_once_its_circuit_opens_and_probed_back(
    kind: MessageKind,
    mode: str,
    health: health_pb2_grpc.HealthStub,
    metric_reader: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Calls refused by the open circuit are logged at DEBUG (the opening warned once).
    caplog.set_level(logging.DEBUG)
    settings = BreakerSettings(misses=MISSES, backoff=0.2, max_backoff=0.2)
    async with sidecar_process("tests.remote_middlewares:Passer") as sidecar:
        remote = await RemoteMiddleware.connect(
            sidecar.address,
            timeout=DEADLINE,
            failure_mode=mode,  # type: ignore[arg-type]
            breaker=settings,
        )
        component = health_pb2.HealthCheckRequest(service=f"sidecar:{sidecar.address}")
        try:
            assert _reason(await _reply(kind, remote), caplog, mode) == ""
            os.kill(sidecar.pid, signal.SIGSTOP)
            try:
                missed = [_reason(await _reply(kind, remote), caplog, mode) for _ in range(MISSES)]
                late = "SIDECAR_DEADLINE_EXCEEDED" if mode == "fail_closed" else "MISSED"
                assert missed == [late] * MISSES
                # Open: the next replies do not wait for the hung sidecar, they are refused
                # before anything is sent (the probe cannot close it: the sidecar is stopped).
                for _ in range(3):
                    end = await _reply(kind, remote)
                    assert _reason(end, caplog, mode) == "SIDECAR_CIRCUIT_OPEN"
                if mode == "fail_closed":
                    assert end.error is not None
                    assert end.error.source == "middleware:Passer"
                    # Nothing the client sees names the sidecar's internal address.
                    assert sidecar.address not in str(end.error.model_dump())
                state = await health.Check(component, timeout=SHORT_TIMEOUT)
                assert state.status == NOT_SERVING
                [opened] = _points(metric_reader, "hookmesh.remote.circuits.open", sidecar.address)
                assert opened.value == 1
                [refused] = _points(
                    metric_reader, "hookmesh.remote.circuit.rejections", sidecar.address
                )
                assert refused.value >= 3
            finally:
                os.kill(sidecar.pid, signal.SIGCONT)
            # The background probe finds it answering again and closes the circuit.
            async with asyncio.timeout(SHORT_TIMEOUT):
                async for state in health.Watch(component):
                    if state.status == SERVING:
                        break
            assert _reason(await _reply(kind, remote), caplog, mode) == ""
            [closed] = _points(metric_reader, "hookmesh.remote.circuits.open", sidecar.address)
            assert closed.value == 0
        finally:
            await remote.aclose()
    gone = await health.Check(component, timeout=SHORT_TIMEOUT)
    assert gone.status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


async def test_an_answer_between_misses_keeps_the_circuit_closed() -> None:
    """Only consecutive misses count: a sidecar that is slow now and then stays in use."""
    changes: list[bool] = []

    async def never() -> None:
        raise AssertionError("no probe while closed")

    breaker = CircuitBreaker("x", never, BreakerSettings(misses=2), changes.append)
    for _ in range(5):
        assert not breaker.missed()
        breaker.heard()
    breaker.check()
    assert changes == []
    assert breaker.missed() is False and breaker.missed() is True
    with pytest.raises(SidecarError) as refused:
        breaker.check()
    assert refused.value.reason == "SIDECAR_CIRCUIT_OPEN"
    await breaker.aclose()
    assert changes == [True, False]


class Hanger(Middleware):
    """A sidecar's reasoning hook that never finishes. The first invocation is silent (it
    will miss its deadline); the later ones report progress more often than the deadline, so
    they never miss theirs: only the circuit opening can end them. The sidecar process
    itself keeps answering (Describe included)."""

    def __init__(self) -> None:
        self.arrived = 0
        self.changed = asyncio.Condition()

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async with self.changed:
            self.arrived += 1
            silent = self.arrived == 1
            self.changed.notify_all()
        if silent:
            await asyncio.Event().wait()
        while True:
            yield CustomEvent(reply_id=agent.reply_id, name="progress", value={})
            await asyncio.sleep(PROGRESS)  # the hook's pace, not a synchronisation
        async for event in next_handler():  # never reached
            yield event

    async def reached(self, count: int) -> None:
        async with asyncio.timeout(SHORT_TIMEOUT), self.changed:
            await self.changed.wait_for(lambda: self.arrived >= count)


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_invocations_waiting_on_a_hung_sidecar_fail_when_its_circuit_opens(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The breaker comes from the agent's YAML config. One reply's invocation misses its
    deadline and opens the circuit (misses: 1); two replies whose invocations are still open
    on the same sidecar (busy, never missing a deadline of their own) end at once with the
    open circuit's SIDECAR_CIRCUIT_OPEN instead of waiting for the sidecar."""
    caplog.set_level(logging.DEBUG)
    hanger = Hanger()
    running = await serve_middleware(hanger)
    config = load_config(
        None,
        middlewares=[
            {
                "type": "remote",
                "target": f"127.0.0.1:{running.port}",
                "failure_mode": mode,
                "timeout": 2.0,
                # No probe within the test: the circuit stays open once it opened.
                "breaker": {"misses": 1, "backoff_seconds": 600, "max_backoff_seconds": 600},
            }
        ],
    )
    chain = await build_chain(config, {})
    try:
        [remote] = chain.middlewares
        assert isinstance(remote, RemoteMiddleware)

        def reply() -> asyncio.Task[list[AgentEvent]]:
            agent = Agent(ScriptedChatModel(["fine"]), middlewares=[remote])
            return asyncio.create_task(collect(agent.reply("hello")))

        first = reply()
        await hanger.reached(1)
        waiting = [reply(), reply()]
        await hanger.reached(3)
        ends = [(await task)[-1] for task in [first, *waiting]]
        assert all(isinstance(end, ReplyEndEvent) for end in ends)
        if mode == "fail_closed":
            reasons = [end.error.reason if end.error else "" for end in ends]  # type: ignore[union-attr]
        else:
            assert [end.finish_reason for end in ends] == ["completed"] * 3  # type: ignore[union-attr]
            skips = [
                r.getMessage() for r in caplog.records if "skipped (fail_open)" in r.getMessage()
            ]
            reasons = [
                "SIDECAR_CIRCUIT_OPEN" if "not called while it is probed" in m else "MISSED"
                for m in skips
            ]
        expected = "SIDECAR_DEADLINE_EXCEEDED" if mode == "fail_closed" else "MISSED"
        assert reasons == [expected, "SIDECAR_CIRCUIT_OPEN", "SIDECAR_CIRCUIT_OPEN"]
        assert remote.link.breaker.open
    finally:
        await chain.close()
        await running.stop(None)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    found = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("hookmesh")
    ]
    caplog.clear()
    return found


async def test_an_open_fail_open_circuit_warns_once_per_open_period_not_per_reply(
    health: health_pb2_grpc.HealthStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = BreakerSettings(misses=1, backoff=0.2, max_backoff=0.2)
    async with sidecar_process("tests.remote_middlewares:Passer") as sidecar:
        remote = await RemoteMiddleware.connect(
            sidecar.address, timeout=DEADLINE, failure_mode="fail_open", breaker=settings
        )
        component = health_pb2.HealthCheckRequest(service=f"sidecar:{sidecar.address}")
        try:
            for period in range(2):
                assert _reason(await _reply("flat", remote), caplog, "fail_open") == ""
                assert _warnings(caplog) == []
                os.kill(sidecar.pid, signal.SIGSTOP)
                try:
                    # The reply whose invocation misses: its skip, and the circuit opening.
                    await _reply("flat", remote)
                    opened, missed = _warnings(caplog)
                    assert "skipped (fail_open)" in missed and "sent nothing" in missed
                    assert f"sidecar {sidecar.address}" in opened and "circuit is open" in opened
                    for _ in range(4):
                        end = await _reply("flat", remote)
                        assert end.finish_reason == "completed"
                    skipped = [
                        r
                        for r in caplog.records
                        if "not called while it is probed" in r.getMessage()
                    ]
                    assert len(skipped) == 4, period
                    assert all(r.levelno == logging.DEBUG for r in skipped)
                    assert _warnings(caplog) == []
                finally:
                    os.kill(sidecar.pid, signal.SIGCONT)
                async with asyncio.timeout(SHORT_TIMEOUT):
                    async for state in health.Watch(component):
                        if state.status == SERVING:
                            break
        finally:
            await remote.aclose()
