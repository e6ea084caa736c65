"""`hookmesh serve agui` as its own process in front of a live agent service."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.testing import hookmesh_process
from tests.agui_stack import TIMEOUT, post_run, run_input
from tests.e2e.commands import run

pytestmark = pytest.mark.timeout(90)


async def test_serve_agui_until_sigterm(tmp_path: Path) -> None:
    settings = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        models={"default": {"type": "scripted", "turns": ["Hi from the agent."]}},
    )
    agent = await start_agent_service(settings, address="127.0.0.1:0")
    config = tmp_path / "agui.yaml"
    config.write_text("cors_origins: [https://app.test]\nkeepalive_seconds: 5\n")
    try:
        async with hookmesh_process(
            "serve", "agui", "--config", str(config), "--listen", "127.0.0.1:0",
            "--agent", f"127.0.0.1:{agent.port}", ready="agui gateway listening on ",
        ) as gateway:  # fmt: skip
            assert gateway.address.startswith("127.0.0.1:")
            url = f"http://{gateway.address}"
            async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
                assert (await http.get("/healthz")).json() == {"status": "serving"}
                body = run_input("t-cli", "r1", [{"id": "u1", "role": "user", "content": "hi"}])
                response, events = await post_run(http, body, origin="https://app.test")
            assert response.headers["access-control-allow-origin"] == "https://app.test"
            answer = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert answer == "Hi from the agent."
        assert gateway.process.returncode == 0  # a clean stop at SIGTERM
    finally:
        await agent.stop(None)


async def test_a_bad_agent_address_is_a_usage_error() -> None:
    code, _, err = await run("serve", "agui", "--agent", "nowhere")
    assert code == 2
    assert err.strip() == "error: --agent 'nowhere' is not host:port (port 0 picks a free one)"
