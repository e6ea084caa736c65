"""docker-compose.yml as shipped, brought up by Debian's docker-compose on the host's network
(deploy/compose/host-network.yml) with the secrets scripts/make-secrets.sh makes: PostgreSQL,
Envoy, two agents, the audit sidecar and the domain services from `make image`'s images; a
knowledge base and a chat through Envoy with a client's token, every agent reloaded by one
signal, and everything down again."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hookmesh.testing import render_envoy_config
from tests.e2e.commands import ROOT, run
from tests.e2e.containers import DEADLINE, SLOW, TAG, free_port
from tests.e2e.test_first_hour import NOISE

pytestmark = pytest.mark.timeout(600)

ENVOY_CONFIG = ROOT / "deploy" / "envoy" / "hookmesh.yaml"
CONTAINER_CONFIG = ROOT / "deploy" / "container" / "agent.yaml"
OVERRIDE = "deploy/compose/host-network.yml"
SERVERS = ("agent", "agent_2", "sidecar", "retrieval", "memory", "tts", "postgres")
"""The servers whose ports the override takes (``HOOKMESH_PORT_<NAME>``)."""


def _host_files(folder: Path, ports: dict[str, int], front: dict[str, int], admin: int) -> None:
    """envoy.yaml and agent.yaml of the override: the shipped files on 127.0.0.1."""
    at = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    routes = {"agent": [at["agent"], at["agent_2"]], "audit-sidecar": [at["sidecar"]],
              **{name: [at[name]] for name in ("retrieval", "memory", "tts")}}  # fmt: skip
    envoy = render_envoy_config(
        routes, ENVOY_CONFIG, {n: f"127.0.0.1:{p}" for n, p in front.items()}
    )
    envoy["admin"]["address"]["socket_address"]["port_value"] = admin
    (folder / "envoy.yaml").write_text(yaml.safe_dump(envoy))
    shipped = {
        f"envoy:{listener['address']['socket_address']['port_value']}": listener["name"]
        for listener in yaml.safe_load(ENVOY_CONFIG.read_text())["static_resources"]["listeners"]
    }  # "envoy:7004" → "memory"

    def local(value: Any) -> Any:
        return f"127.0.0.1:{front[shipped[value]]}" if str(value) in shipped else value

    agent = yaml.safe_load(CONTAINER_CONFIG.read_text())
    for entry in agent["middlewares"]:
        for key, value in (entry.get("params") or entry).items():
            (entry.get("params") or entry)[key] = local(value)
    (folder / "agent.yaml").write_text(yaml.safe_dump(agent))
    for path in folder.iterdir():
        path.chmod(0o644)  # the containers read them as their own users


async def _routed(admin: int) -> None:
    """Wait (bounded) until Envoy sees every replica healthy."""
    # NOTE(tests): Envoy tells health only through its admin interface, so this polls it.
    async with asyncio.timeout(DEADLINE), httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                clusters = (await http.get(f"http://127.0.0.1:{admin}/clusters?format=json")).json()
                hosts = [h for c in clusters["cluster_statuses"] for h in c["host_statuses"]]
                if hosts and all(h["health_status"]["eds_health_status"] == "HEALTHY"
                                 and len(h["health_status"]) == 1 for h in hosts):  # fmt: skip
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _compose(folder: Path, env: dict[str, str], *args: str, timeout: float = 300) -> str:
    process = await asyncio.create_subprocess_exec(
        "docker-compose", "-f", "docker-compose.yml", "-f", OVERRIDE, *args, cwd=folder,
        env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(timeout):
        out, _ = await process.communicate()
    assert process.returncode == 0, f"docker-compose {' '.join(args)}: {out.decode()}"
    return out.decode()


async def _reloaded(folder: Path, env: dict[str, str], services: tuple[str, ...]) -> None:
    """Wait (bounded) until every one of `services` logged its middleware reload."""
    # NOTE(tests): a reload by signal is told only in the log, so this polls it.
    async with asyncio.timeout(DEADLINE):
        while True:
            logs = await _compose(folder, env, "logs", *services)
            if logs.count("middlewares reloaded: generation 2") == len(services):
                return
            await asyncio.sleep(0.5)


def _project(folder: Path) -> tuple[dict[str, str], dict[str, int], int]:
    """The project folder as a new user has it (the checkout's files, secrets made by the
    script), the override's files and variables; returns the variables, Envoy's listener
    ports and its admin port."""
    for name in ("docker-compose.yml", "deploy", "docs"):
        (folder / name).symlink_to(ROOT / name)
    ports = {name: free_port() for name in SERVERS}
    front = {name: free_port() for name in ("agent", "audit-sidecar", "retrieval", "memory", "tts")}
    admin = free_port()
    (folder / "host").mkdir()
    _host_files(folder / "host", ports, front, admin)
    env = {
        "COMPOSE_PROJECT_NAME": f"hookmesh-test-{secrets.token_hex(4)}",
        "HOOKMESH_IMAGE_TAG": TAG,
        "HOOKMESH_HOST_FILES": str(folder / "host"),
        **{f"HOOKMESH_PORT_{name.upper()}": str(port) for name, port in ports.items()},
    }
    return env, front, admin


async def test_compose_runs_the_shipped_file_and_chats_through_envoy(tmp_path: Path) -> None:
    env, front, admin = _project(tmp_path)
    made = await asyncio.create_subprocess_exec(ROOT / "scripts" / "make-secrets.sh", cwd=tmp_path)
    assert await made.wait() == 0
    tokens = (tmp_path / "secrets" / "hookmesh-tokens").read_text().split()
    client = {"CLIENT_TOKEN": next(t for t in tokens if t.startswith("client:")).split(":")[1]}
    at = {name: f"127.0.0.1:{port}" for name, port in front.items()}
    steps = [
        ("kb", "create", "handbook", "--target", at["retrieval"]),
        ("ingest", "docs", "--kb", "handbook", "--target", at["retrieval"]),
        ("search", "how does a sidecar authenticate", "--target", at["retrieval"]),
        ("chat", "What is the weather in Oslo?", "--target", at["agent"]),
    ]
    outputs = []
    try:
        await _compose(tmp_path, env, "up", "--detach")
        await _routed(admin)
        for step in steps:  # through Envoy, with a client's token
            code, out, err = await run(
                *step, "--token-env", "CLIENT_TOKEN", cwd=tmp_path, env=client, timeout=SLOW
            )
            assert code == 0, f"{step}: {err}"
            outputs.append(out)
        await _compose(tmp_path, env, "kill", "-s", "HUP", "agent", "agent-2")  # every replica
        await _reloaded(tmp_path, env, ("agent", "agent-2"))
    finally:
        logs = await _compose(tmp_path, env, "logs", "--no-color", timeout=60)
        await _compose(tmp_path, env, "down", "--volumes", "--timeout", "20")
    assert "[1] handbook/" in outputs[2]
    assert "end: completed" in outputs[3] and "Oslo" in outputs[3]
    assert not [n for n in NOISE if n in logs], logs
