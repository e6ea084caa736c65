"""The image as shipped: every service of the suite in a container of its own (host network,
127.0.0.1 at free ports), healthy by the image's own HEALTHCHECK, the README's first-hour
commands run against them, and each container stopped cleanly by SIGTERM."""

from __future__ import annotations

import asyncio
import re
import wave
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.commands import ROOT, run
from tests.e2e.containers import HOOKMESH, SLOW, Container, free_port, running
from tests.e2e.test_first_hour import NOISE, first_hour_commands

pytestmark = pytest.mark.timeout(400)

SERVICE_OF = {"chat": "agent", "sessions": "agent", "say": "tts", "kb": "retrieval",
              "ingest": "retrieval", "search": "retrieval", "memory": "memory"}  # fmt: skip
"""Which container each first-hour command talks to (``--target``)."""


def _agent_config(ports: dict[str, int]) -> dict[str, object]:
    """What `hookmesh up` gives its agent, as a file: memory and the audit sidecar by address."""
    return {
        "listen": f"127.0.0.1:{ports['agent']}",
        "models": {"default": {"type": "scripted"}},
        "middlewares": [
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
                "params": {"target": f"127.0.0.1:{ports['memory']}", "mode": "static_control"},
            },
            {
                "type": "remote",
                "target": f"127.0.0.1:{ports['sidecar']}",
                "failure_mode": "fail_open",
            },
        ],
    }


def _commands(ports: dict[str, int]) -> dict[str, list[str]]:
    """Each container's command: the way docs/deploy.md runs each service."""

    def at(service: str) -> str:
        return f"127.0.0.1:{ports[service]}"

    return {
        "agent": ["serve", "agent", "--config", "/etc/hookmesh/test.yaml"],
        "sidecar": ["sidecar", "--middleware", "hookmesh.suite.demo:AuditTrail",
                    "--listen", at("sidecar")],
        "retrieval": ["serve", "retrieval", "--listen", at("retrieval")],
        "tts": ["serve", "tts", "--listen", at("tts")],
        "memory": ["serve", "memory", "--listen", at("memory")],
        "agui": ["serve", "agui", "--listen", at("agui"), "--agent", at("agent")],
        "a2a": ["serve", "a2a", "--listen", at("a2a"), "--agent", at("agent")],
        "mcp": ["serve", "mcp", "--transport", "http", "--listen", at("mcp"), "--retrieval",
                at("retrieval"), "--memory", at("memory"), "--tts", at("tts")],
    }  # fmt: skip


async def test_the_image_runs_the_suite_and_the_first_hour(tmp_path: Path) -> None:
    _, first_hour = first_hour_commands()
    ports = {name: free_port() for name in ("agent", "sidecar", "retrieval", "tts", "memory",
                                            "agui", "a2a", "mcp")}  # fmt: skip
    config = tmp_path / "agent.yaml"
    config.write_text(yaml.safe_dump(_agent_config(ports)))
    config.chmod(0o644)  # the image runs as its own user
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    outputs: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        containers: dict[str, Container] = {}
        for name, args in _commands(ports).items():
            volumes = [f"{config}:/etc/hookmesh/test.yaml:ro"] if name == "agent" else []
            containers[name] = await stack.enter_async_context(
                running(HOOKMESH, *args, volumes=volumes)
            )
        await asyncio.gather(*(c.healthy() for c in containers.values()))

        for command in first_hour:
            if command[1] == "status":  # the containers' health answered it
                continue
            target = f"127.0.0.1:{ports[SERVICE_OF[command[1]]]}"
            code, out, err = await run(*command[1:], "--target", target, cwd=tmp_path, timeout=SLOW)
            assert code == 0, f"{' '.join(command)} exited {code}: {err}"
            outputs[" ".join(command[1:3]) if command[1] in ("kb", "memory", "sessions")
                    else command[1]] = out  # fmt: skip
        async with httpx.AsyncClient(timeout=30) as http:
            page = await http.get(f"http://127.0.0.1:{ports['agui']}/")
            card_url = f"http://127.0.0.1:{ports['a2a']}/.well-known/agent-card.json"
            card = (await http.get(card_url)).json()

        codes = {name: await c.stop() for name, c in containers.items()}
        logs = {name: await c.logs() for name, c in containers.items()}
    assert codes == dict.fromkeys(containers, 0), logs  # SIGTERM: a clean stop
    for name, log in logs.items():
        assert not [n for n in NOISE if n in log], f"{name}:\n{log}"

    assert "end: completed" in outputs["chat"]
    session = re.search(r"session (\w+)", outputs["chat"])
    assert session is not None and session.group(1) in outputs["sessions list"]
    with wave.open(str(tmp_path / "hello.wav")) as wav:
        assert wav.getnframes() > wav.getframerate() // 2
    assert re.search(r"ingested [1-9]\d* documents into handbook", outputs["ingest"])
    assert "[1] handbook/" in outputs["search"]
    assert "green tea" in outputs["memory search"]
    assert page.status_code == 200 and card["name"] == "assistant"
