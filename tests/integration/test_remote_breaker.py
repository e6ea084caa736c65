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
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import BreakerSettings, RemoteMiddleware, SidecarError, serve_middleware
from hookmesh.remote._breaker import CircuitBreaker
from hookmesh.schema import AgentEvent, MessageKind, ReplyEndEvent
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT, collect
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(60)

DEADLINE = 0.3
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
    caplog.set_level(logging.WARNING)
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
