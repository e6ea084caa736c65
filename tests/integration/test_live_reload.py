"""Live middleware swaps: the AdminService and SIGHUP reload the chain from the config file;
new replies take the new chain, running ones finish on the old, a bad config changes nothing,
and a remote middleware moves from the Python sidecar to the Node sidecar under load."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from hookmesh.client import AdminClient, AgentClient, AgentClientError
from hookmesh.schema import AgentEvent, CustomEvent, ReplyEndEvent
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from tests.agent_helpers import SHORT_TIMEOUT
from tests.mesh_app import PARK, Gate
from tests.node_process import start_node_sidecar, stop_node
from tests.sidecar_process import agent_process, sidecar_process

pytestmark = pytest.mark.timeout(120)

TOKENS = "ops:ops-token\nalice:alice-token\n"


def _tagger(name: str) -> dict[str, Any]:
    return {"type": "local", "import": "tests.middlewares:Tagger", "params": {"name": name}}


def _gate(gate: Gate) -> dict[str, Any]:
    return {
        "type": "local",
        "import": "tests.mesh_app:GateMiddleware",
        "params": {"path": str(gate.path)},
    }


def _write(path: Path, **config: Any) -> None:
    path.write_text(yaml.safe_dump(config))


def _tags(events: list[AgentEvent]) -> set[Any]:
    return {e.value for e in events if isinstance(e, CustomEvent) and e.name == "pre"}


def _finished(events: list[AgentEvent]) -> bool:
    end = events[-1]
    return isinstance(end, ReplyEndEvent) and end.finish_reason == "completed"


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    async with Gate(tmp_path / "gate.sock") as opened:
        yield opened


@pytest.fixture
async def served(tmp_path: Path, gate: Gate) -> AsyncIterator[tuple[AgentService, Path]]:
    """An agent service started from a config file it can reload (ops may administer)."""
    (tmp_path / "tokens").write_text(TOKENS)
    path = tmp_path / "agent.yaml"
    base = {
        "store": f"sqlite:///{tmp_path}/agent.db",
        "auth": {"token_file": str(tmp_path / "tokens")},
        "admin_principals": ["ops"],
    }
    _write(path, **base, middlewares=[_gate(gate), _tagger("v1")])
    service = await start_agent_service(
        load_config(path), address="127.0.0.1:0", reload_from=lambda: load_config(path)
    )
    try:
        yield service, path
    finally:
        gate.open()
        await service.stop(None)


async def test_a_reload_serves_new_replies_while_running_ones_finish_on_the_old_chain(
    served: tuple[AgentService, Path], gate: Gate
) -> None:
    service, path = served
    target = f"127.0.0.1:{service.port}"
    config = yaml.safe_load(path.read_text())
    async with (
        AgentClient(target, timeout=SHORT_TIMEOUT, token="alice-token") as client,
        AdminClient(target, timeout=SHORT_TIMEOUT, token="ops-token") as ops,
        AdminClient(target, timeout=SHORT_TIMEOUT, token="alice-token") as alice,
    ):
        parked = client.reply(PARK)
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert (await anext(parked)).type == "reply_start"
        await gate.wait_for(1, SHORT_TIMEOUT)
        old = service.servicer.chain

        _write(path, **{**config, "middlewares": [_gate(gate), _tagger("v2")]})
        with pytest.raises(AgentClientError) as refused:
            await alice.reload_middlewares()
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "ADMIN_ONLY",
        )
        done = await ops.reload_middlewares()
        assert (done.generation, done.middleware_keys, done.draining_replies) == (
            2,
            ["GateMiddleware", "tagger-v2"],
            1,
        )
        assert done.restart_keys == []
        assert _tags([e async for e in client.reply("hi")]) == {"v2"}

        gate.open()  # the parked reply reasons only now, still on the chain it started on
        async with asyncio.timeout(SHORT_TIMEOUT):
            rest = [e async for e in parked]
        assert _tags(rest) == {"v1"} and _finished(rest)
        await service.servicer.drain(SHORT_TIMEOUT)
        assert old.closed and not service.servicer.chain.closed

        # A bad file changes nothing: the refusal names the problem, v2 keeps serving.
        for bad in (
            {**config, "middlewares": [_tagger("v3"), {"type": "local", "import": "nope:X"}]},
            {**config, "middlewares": [{"type": "remote"}]},
            {**config, "agent": {"kind": "neither"}},
        ):
            _write(path, **bad)
            with pytest.raises(AgentClientError) as invalid:
                await ops.reload_middlewares()
            assert (invalid.value.code, invalid.value.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "INVALID_CONFIG",
            )
            assert _tags([e async for e in client.reply("hi")]) == {"v2"}

        _write(path, **{**config, "agent": {"name": "renamed"}, "middlewares": [_tagger("v4")]})
        done = await ops.reload_middlewares()
        assert (done.generation, done.restart_keys) == (3, ["agent"])
        assert _tags([e async for e in client.reply("hi")]) == {"v4"}


async def test_a_service_without_a_config_source_refuses_to_reload(tmp_path: Path) -> None:
    config = load_config(
        None, store=f"sqlite:///{tmp_path}/agent.db", admin_principals=["anonymous"]
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin:
            with pytest.raises(AgentClientError) as refused:
                await admin.reload_middlewares()
        assert refused.value.reason == "NO_CONFIG_FILE"
    finally:
        await service.stop(None)


async def test_sighup_reloads_the_middlewares_of_hookmesh_serve_agent(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    base = {"store": f"sqlite:///{tmp_path}/agent.db", "admin_principals": ["anonymous"]}
    _write(path, **base, middlewares=[_tagger("v1")])
    async with (
        agent_process(path) as agent,
        AgentClient(agent.address, timeout=SHORT_TIMEOUT) as client,
    ):
        assert _tags([e async for e in client.reply("hi")]) == {"v1"}
        _write(path, **base, middlewares=[_tagger("v2")])
        agent.process.send_signal(signal.SIGHUP)
        # The reload runs in the background; each reply observes which chain served it.
        async with asyncio.timeout(SHORT_TIMEOUT):
            while (tags := _tags([e async for e in client.reply("hi")])) == {"v1"}:
                pass
        assert tags == {"v2"}
        assert agent.process.returncode is None  # reloaded, not restarted

        _write(path, **base, middlewares=[_tagger("v3")])
        code, out, _ = await _hookmesh("admin", "reload", "--target", agent.address)
        assert (code, out.splitlines()[0]) == (0, "generation 3: tagger-v3")
        assert _tags([e async for e in client.reply("hi")]) == {"v3"}
        _write(path, **base, middlewares=[{"type": "local", "import": "nope:X"}])
        code, _, err = await _hookmesh("admin", "reload", "--target", agent.address)
        assert (code, err) == (
            1,
            "error: the new configuration is invalid: cannot load 'nope:X': No module named "
            "'nope': fix the file and reload again (the running middlewares stay) "
            "[INVALID_CONFIG]\n",
        )
        assert _tags([e async for e in client.reply("hi")]) == {"v3"}


async def _hookmesh(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the `hookmesh` command."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SHORT_TIMEOUT * 2):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _served_by(events: list[AgentEvent]) -> set[str]:
    """Which sidecar wrapped the reply's model calls: python-tag or the Node token counter."""
    names = {e.name: e.value for e in events if isinstance(e, CustomEvent)}
    return (
        {"python"}
        if names.get("served_by") == "python"
        else ({"node"} if "node.tokens" in names else set())
    )


async def test_a_remote_middleware_moves_from_python_to_node_under_load_without_a_failed_reply(
    tmp_path: Path, gate: Gate
) -> None:
    node, node_address = start_node_sidecar()
    path = tmp_path / "agent.yaml"
    base = {"store": f"sqlite:///{tmp_path}/agent.db", "admin_principals": ["anonymous"]}
    try:
        async with sidecar_process("tests.mesh_app:PythonTag") as python:
            remote = {"type": "remote", "failure_mode": "fail_closed"}
            _write(path, **base, middlewares=[_gate(gate), {**remote, "target": python.address}])
            service = await start_agent_service(
                load_config(path), address="127.0.0.1:0", reload_from=lambda: load_config(path)
            )
            target = f"127.0.0.1:{service.port}"
            # Each reply is recorded with the phase it started in: 0 before the reload was
            # asked for, 1 while it ran, 2 after it answered.
            results: list[tuple[int, list[AgentEvent]]] = []
            progress = asyncio.Condition()
            phase = 0
            stop = asyncio.Event()

            async def counted(at_least: int, in_phase: int) -> None:
                async with asyncio.timeout(SHORT_TIMEOUT), progress:
                    await progress.wait_for(
                        lambda: sum(p == in_phase for p, _ in results) >= at_least
                    )

            try:
                async with (
                    AgentClient(target, timeout=SHORT_TIMEOUT * 3) as client,
                    AdminClient(target, timeout=SHORT_TIMEOUT) as admin,
                ):

                    async def load() -> None:
                        while not stop.is_set():
                            started = phase
                            events = [e async for e in client.reply("hi")]
                            async with progress:
                                results.append((started, events))
                                progress.notify_all()

                    parked = [asyncio.create_task(_collect(client, PARK)) for _ in range(3)]
                    await gate.wait_for(3, SHORT_TIMEOUT)
                    workers = [asyncio.create_task(load()) for _ in range(8)]
                    await counted(40, 0)
                    _write(
                        path,
                        **base,
                        middlewares=[_gate(gate), {**remote, "target": node_address}],
                    )
                    phase = 1
                    done = await admin.reload_middlewares()
                    phase = 2
                    assert done.middleware_keys == ["GateMiddleware", "node-token-counter"]
                    assert done.draining_replies >= 3  # the parked ones, at least
                    await counted(40, 2)
                    gate.open()
                    stop.set()
                    async with asyncio.timeout(SHORT_TIMEOUT * 3):
                        await asyncio.gather(*workers)
                        old = await asyncio.gather(*parked)
            finally:
                await service.stop(None)
    finally:
        stop_node(node)
    assert all(_finished(events) for _, events in results)  # not one reply failed
    assert all(_finished(events) and _served_by(events) == {"python"} for events in old)
    by_phase = {n: [_served_by(e) for p, e in results if p == n] for n in (0, 1, 2)}
    assert len(by_phase[0]) >= 40 and all(s == {"python"} for s in by_phase[0])
    assert all(s in ({"python"}, {"node"}) for s in by_phase[1])
    assert len(by_phase[2]) >= 40 and all(s == {"node"} for s in by_phase[2])


async def _collect(client: AgentClient, text: str) -> list[AgentEvent]:
    return [e async for e in client.reply(text)]
