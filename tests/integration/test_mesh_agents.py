"""Two agent service processes on one PostgreSQL behind a real Envoy (deploy/envoy/): replies
spread over both, tokens pass through, and a replica killed under load fails only its own
replies, fast, while the survivor takes every new reply and the broken sessions; both
clients (Python and Node) re-attach after such a reset by themselves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
import yaml

from hookmesh.cli._printer import event_json
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.schema import AgentEvent, text_of
from hookmesh.testing import EnvoyProxy, ServerProcess, hookmesh_process
from tests.agent_helpers import SHORT_TIMEOUT
from tests.envoy import CONFIG as ENVOY_CONFIG
from tests.mesh_app import PARK, Gate
from tests.node_process import NODE_DIR, node_binary
from tests.session_backends import postgres_schema
from tests.sidecar_process import ROOT, agent_process

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

HELLO = "Hello from hookmesh."
TOKENS = {"alice": "alice-token", "bob": "bob-token"}
LOAD = 200
PARKED = 20


@dataclass
class Mesh:
    """Two replicas behind Envoy, and the gate their parked replies wait at."""

    replicas: list[ServerProcess]
    envoy: EnvoyProxy
    gate: Gate

    def client(self, principal: str = "alice") -> AgentClient:
        """A client of the agent service through Envoy, as `principal`."""
        return AgentClient(
            self.envoy.address("agent"), timeout=SHORT_TIMEOUT, token=TOKENS[principal]
        )

    async def served(self) -> dict[str, int]:
        """Envoy's count of successful calls per replica address."""
        return {a: s["rq_success"] for a, s in (await self.envoy.hosts())["agent"].items()}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mesh(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    folder = tmp_path_factory.mktemp("mesh")
    tokens = folder / "tokens"
    tokens.write_text("".join(f"{p}:{t}\n" for p, t in TOKENS.items()))
    async with AsyncExitStack() as stack:
        backend = await stack.enter_async_context(postgres_schema(postgres_url))
        gate = await stack.enter_async_context(Gate(folder / "gate.sock"))
        config = folder / "agent.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    **backend.config(),
                    "auth": {"token_file": str(tokens)},
                    "middlewares": [
                        {
                            "type": "local",
                            "import": "tests.mesh_app:GateMiddleware",
                            "params": {"path": str(gate.path)},
                        }
                    ],
                }
            )
        )
        replicas = list(
            await asyncio.gather(
                stack.enter_async_context(agent_process(config)),
                stack.enter_async_context(agent_process(config)),
            )
        )
        envoy = await stack.enter_async_context(
            EnvoyProxy({"agent": [r.address for r in replicas]}, ENVOY_CONFIG)
        )
        stack.callback(gate.open)  # release whatever is still parked before the processes stop
        yield Mesh(replicas, envoy, gate)


async def test_concurrent_replies_spread_over_both_replicas_on_one_database(mesh: Mesh) -> None:
    before = await mesh.served()
    async with mesh.client() as client:
        async with asyncio.timeout(60):
            answers = await asyncio.gather(
                *(client.text("hi", session_id=f"load-{i}") for i in range(LOAD))
            )
        assert answers == [HELLO] * LOAD
        served = {a: n - before[a] for a, n in (await mesh.served()).items()}
        sessions, _ = await client.list_sessions(page_size=1000)
    assert sum(served.values()) == LOAD
    assert min(served.values()) >= LOAD // 4, served  # round robin: both took their share
    # Both replicas wrote to the one database: either one lists every session.
    assert {f"load-{i}" for i in range(LOAD)} <= {s.session_id for s in sessions}


async def test_tokens_and_principals_pass_through_envoy(mesh: Mesh) -> None:
    async with mesh.client("alice") as alice, mesh.client("bob") as bob:
        assert await alice.text("mine", session_id="private") == HELLO
        with pytest.raises(AgentClientError) as hidden:
            await bob.get_session("private")
        assert hidden.value.reason == "SESSION_NOT_FOUND"
    async with AgentClient(mesh.envoy.address("agent"), timeout=SHORT_TIMEOUT) as anonymous:
        with pytest.raises(AgentClientError) as refused:
            await anonymous.text("hi")
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_REQUIRED",
    )


async def test_interrupt_reaches_the_reply_on_another_replica(mesh: Mesh) -> None:
    """Interrupt sent to the replica that does not run the reply (as round robin will do
    half the time) is relayed through PostgreSQL: the reply ends interrupted."""
    arrived = len(mesh.gate.arrivals)
    async with mesh.client() as client:
        reply = asyncio.create_task(_events(client.reply(PARK, session_id="stop-me")))
        [runner_pid] = (await mesh.gate.wait_for(arrived + 1, SHORT_TIMEOUT))[arrived:]
        [other] = [r for r in mesh.replicas if r.pid != runner_pid]
        async with AgentClient(other.address, timeout=SHORT_TIMEOUT, token=TOKENS["alice"]) as o:
            assert await o.interrupt("stop-me") is True
            async with asyncio.timeout(SHORT_TIMEOUT):
                events = await reply
            assert await o.interrupt("stop-me") is False  # nothing runs any more
    assert events[-1].type == "reply_end"
    assert events[-1].finish_reason == "interrupted"


async def _events(stream: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [event async for event in stream]


async def _first_event_then_rest(client: AgentClient, session_id: str) -> list[str]:
    """Start a parked reply; return once its first event arrived, with a task for the rest."""
    stream = client.reply(PARK, session_id=session_id)
    first = await anext(stream)
    return [first.type, *[e.type async for e in stream]]


async def test_a_killed_replicas_replies_go_on_on_the_survivor(mesh: Mesh) -> None:
    """SIGKILL one replica with replies in flight on both: each client re-attaches through
    Envoy, the survivor continues the dead replica's replies from their last saved step, and
    every client sees its whole reply once, in order."""
    victim, survivor = mesh.replicas
    before = len(mesh.gate.arrivals)
    async with mesh.client() as client:
        parked = [
            asyncio.create_task(_first_event_then_rest(client, f"broken-{i}"))
            for i in range(PARKED)
        ]
        arrivals = (await mesh.gate.wait_for(before + PARKED, SHORT_TIMEOUT))[before:]
        on_victim = [p for p in arrivals if p == victim.pid]
        assert on_victim and len(on_victim) < PARKED  # both replicas hold parked replies
        await victim.kill()

        # Every new reply succeeds: Envoy retries what cannot reach the dead replica.
        async with asyncio.timeout(SHORT_TIMEOUT):
            fresh = await asyncio.gather(*(client.text("hi") for _ in range(PARKED)))
        assert fresh == [HELLO] * PARKED

        # Released, every parked reply ends, the dead replica's continued on the survivor.
        mesh.gate.open()
        async with asyncio.timeout(SHORT_TIMEOUT):
            finished = await asyncio.gather(*parked)
        whole = ["reply_start", *finished[0][1:]]
        assert all(events == whole for events in finished), finished
        assert whole[-1] == "reply_end"
        for i in range(PARKED):
            context = (await client.get_session(f"broken-{i}")).context
            assert [text_of(m) for m in context] == [PARK, HELLO]
            assert await _continue(client, f"broken-{i}") == HELLO
    hosts = (await mesh.envoy.hosts())["agent"]
    assert hosts[survivor.address]["rq_success"] > 0


async def _continue(client: AgentClient, session_id: str) -> str:
    """Reply on a session whose last replica died; SESSION_BUSY lasts until the database has
    noticed the dead replica's connection (bounded here by the test's deadline)."""
    async with asyncio.timeout(SHORT_TIMEOUT):
        while True:
            try:
                return await client.text("again", session_id=session_id)
            except AgentClientError as exc:
                if exc.reason != "SESSION_BUSY":
                    raise
            await asyncio.sleep(0.1)


async def test_the_node_client_reattaches_through_envoy_to_a_restarted_replica(
    tmp_path: Path,
) -> None:
    """chat.js through Envoy, its replica SIGKILLed after the reply began (Envoy resets the
    stream: grpc-js says INTERNAL, the client reads STREAM_RESET, as the Python one does),
    then started again on the same store and address: the replica continues its orphaned
    reply, and chat.js re-attaches by itself and prints the whole reply, each event once."""
    async with AsyncExitStack() as stack:
        gate = await stack.enter_async_context(Gate(tmp_path / "gate.sock"))
        config = tmp_path / "agent.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "store": f"sqlite:///{tmp_path}/agent.db",
                    "middlewares": [
                        {
                            "type": "local",
                            "import": "tests.mesh_app:GateMiddleware",
                            "params": {"path": str(gate.path)},
                        }
                    ],
                }
            )
        )
        replica = await stack.enter_async_context(agent_process(config))
        envoy = await stack.enter_async_context(
            EnvoyProxy({"agent": [replica.address]}, ENVOY_CONFIG)
        )
        chat = await asyncio.create_subprocess_exec(
            node_binary(), str(NODE_DIR / "chat.js"), "--json", "--timeout", str(SHORT_TIMEOUT),
            "--target", envoy.address("agent"), PARK,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stack.push_async_callback(_reap, chat)
        assert chat.stdout is not None
        async with asyncio.timeout(SHORT_TIMEOUT):
            first = json.loads(await chat.stdout.readline())
            await gate.wait_for(1, SHORT_TIMEOUT)
        assert first["type"] == "reply_start"
        await replica.kill()
        await stack.enter_async_context(
            hookmesh_process(
                "serve", "agent", "--config", str(config), "--listen", replica.address,
                "--app-dir", str(ROOT), ready="agent service listening on ",
            )
        )  # fmt: skip
        async with asyncio.timeout(SHORT_TIMEOUT):
            out, err = await chat.communicate()
        assert (chat.returncode, err.decode()) == (0, "")
        lines = [first, *(json.loads(line) for line in out.splitlines())]
        async with AgentClient(envoy.address("agent"), timeout=SHORT_TIMEOUT) as client:
            whole = [event_json(e) async for e in client.watch(first["session_id"])]
    assert lines == whole
    assert whole[-1]["finish_reason"] == "FINISH_REASON_COMPLETED"


async def _reap(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.wait()
