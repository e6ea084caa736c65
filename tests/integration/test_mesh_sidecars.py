"""One remote middleware served by two sidecar processes behind a real Envoy: a sidecar killed
under load costs no reply with fail_open and only the invocations in flight on it with
fail_closed, and the agent's Intercept stream reconnects through Envoy. Tokens and one trace
cross both hops (client → Envoy → agent → Envoy → sidecar)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from hookmesh.client import AgentClient
from hookmesh.remote import serve_middleware
from hookmesh.schema import AgentEvent, CustomEvent, ReplyEndEvent
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.testing import EnvoyProxy, ServerProcess
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT
from tests.envoy import CONFIG as ENVOY_CONFIG
from tests.mesh_app import GATE_ENV, Gate
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)

HELLO = "Hello from hookmesh."
PARKED = 10


def _sidecar_pids(events: list[AgentEvent]) -> set[int]:
    """The process ids the sidecar's Intercept-stream hook reported in a reply."""
    return {e.value for e in events if isinstance(e, CustomEvent) and e.name == "sidecar"}


async def _reply(client: AgentClient) -> list[AgentEvent]:
    async with asyncio.timeout(SHORT_TIMEOUT * 2):
        return [e async for e in client.reply("hi")]


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[tuple[list[ServerProcess], EnvoyProxy, Gate]]:
    """Two gated sidecars of one middleware behind Envoy (the gate starts open)."""
    async with AsyncExitStack() as stack:
        gate = await stack.enter_async_context(Gate(tmp_path / "gate.sock"))
        gate.open()
        env = {GATE_ENV: str(gate.path)}
        sidecars = list(
            await asyncio.gather(
                *(
                    stack.enter_async_context(
                        sidecar_process("tests.mesh_app:GatedPromptMiddleware", env=env)
                    )
                    for _ in range(2)
                )
            )
        )
        envoy = await stack.enter_async_context(
            EnvoyProxy({"audit-sidecar": [s.address for s in sidecars]}, ENVOY_CONFIG)
        )
        stack.callback(gate.open)
        yield sidecars, envoy, gate


async def _agent(tmp_path: Path, target: str, failure_mode: str) -> AgentService:
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        # A long message deadline: the replies held at the gate must not time out.
        middlewares=[
            {"type": "remote", "target": target, "failure_mode": failure_mode, "timeout": 60}
        ],
    )
    return await start_agent_service(config, address="127.0.0.1:0")


@pytest.mark.parametrize("failure_mode", ["fail_open", "fail_closed"])
async def test_a_sidecar_killed_under_load_costs_only_its_inflight_invocations(
    tmp_path: Path, mesh: tuple[list[ServerProcess], EnvoyProxy, Gate], failure_mode: str
) -> None:
    sidecars, envoy, gate = mesh
    service = await _agent(tmp_path, envoy.address("audit-sidecar"), failure_mode)
    try:
        async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
            (holder,) = _sidecar_pids(await _reply(client))  # the Intercept stream's sidecar
            victim = next(s for s in sidecars if s.pid == holder)
            survivor = next(s for s in sidecars if s.pid != holder)

            gate.close()
            seen = len(gate.arrivals)
            parked = [asyncio.create_task(_reply(client)) for _ in range(PARKED)]
            arrivals = (await gate.wait_for(seen + PARKED, SHORT_TIMEOUT))[seen:]
            on_victim = arrivals.count(victim.pid)
            assert 0 < on_victim < PARKED  # the unary hook's calls went to both sidecars
            split = (await envoy.hosts())["audit-sidecar"]
            assert all(split[s.address]["rq_total"] > 0 for s in sidecars)  # Envoy saw it too
            await victim.kill()

            # The replies whose invocation was in flight on the dead sidecar end at once (the
            # others wait at the gate): fail_open skips the hook, fail_closed fails the reply.
            async with asyncio.timeout(SHORT_TIMEOUT):
                ended: list[asyncio.Task[list[AgentEvent]]] = []
                while len(ended) < on_victim:
                    done, _ = await asyncio.wait(
                        [t for t in parked if t not in ended], return_when=asyncio.FIRST_COMPLETED
                    )
                    ended += done
            assert len(ended) == on_victim
            for task in ended:
                end = task.result()[-1]
                assert isinstance(end, ReplyEndEvent)
                if failure_mode == "fail_open":
                    assert end.finish_reason == "completed"
                else:
                    assert end.finish_reason == "error" and end.error is not None
                    assert end.error.reason == "SIDECAR_UNAVAILABLE", end.error

            gate.open()
            async with asyncio.timeout(SHORT_TIMEOUT * 2):
                rest = [(await t)[-1] for t in parked if t not in ended]
            assert len(rest) == PARKED - on_victim
            assert all(
                isinstance(e, ReplyEndEvent) and e.finish_reason == "completed" for e in rest
            )

            # New replies: the Intercept stream was reopened through Envoy, to the survivor.
            fresh = await asyncio.gather(*(_reply(client) for _ in range(PARKED)))
            assert all(_sidecar_pids(events) == {survivor.pid} for events in fresh)
    finally:
        await service.stop(None)


async def test_one_trace_and_the_tokens_cross_envoy_to_the_agent_and_its_sidecar(
    tmp_path: Path, span_exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TOKENS", "alice:agent-token")
    monkeypatch.setenv("SIDECAR_TOKEN", "sidecar-token")
    sidecar = await serve_middleware(mws.CallCounter(), token="sidecar-token")
    try:
        async with EnvoyProxy(
            {"audit-sidecar": [f"127.0.0.1:{sidecar.port}"]}, ENVOY_CONFIG
        ) as egress:
            config = load_config(
                None,
                store=f"sqlite:///{tmp_path}/agent.db",
                auth={"token_env": "AGENT_TOKENS"},
                middlewares=[
                    {
                        "type": "remote",
                        "target": egress.address("audit-sidecar"),
                        "token_env": "SIDECAR_TOKEN",
                    }
                ],
            )
            service = await start_agent_service(config, address="127.0.0.1:0")
            try:
                async with EnvoyProxy(
                    {"agent": [f"127.0.0.1:{service.port}"]}, ENVOY_CONFIG
                ) as ingress:
                    span_exporter.clear()
                    with trace.get_tracer("test").start_as_current_span("user request") as root:
                        async with AgentClient(
                            ingress.address("agent"), timeout=SHORT_TIMEOUT, token="agent-token"
                        ) as client:
                            assert await client.text("hi") == HELLO
            finally:
                await service.stop(None)
    finally:
        await sidecar.stop(None)
    spans = {(s.name, s.kind): s for s in span_exporter.get_finished_spans()}
    name = "/hookmesh.v1.AgentService/Reply"
    client_call = spans[name, trace.SpanKind.CLIENT]
    reply = spans[name, trace.SpanKind.SERVER]
    model_call = spans["middleware CallCounter on_model_call", trace.SpanKind.SERVER]
    trace_id = root.get_span_context().trace_id
    assert {s.context.trace_id for s in (client_call, reply, model_call)} == {trace_id}
    assert reply.parent is not None and reply.parent.span_id == client_call.context.span_id
    assert reply.attributes is not None and reply.attributes["rpc.method"] == "Reply"
    # The sidecar's span hangs under a span of the agent's reply, not under a new root.
    others = {s.context.span_id for s in span_exporter.get_finished_spans() if s is not model_call}
    assert model_call.parent is not None and model_call.parent.span_id in others
