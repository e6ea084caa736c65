"""`hookmesh serve a2a` as its own process in front of a live agent service."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.testing import hookmesh_process
from tests.e2e.commands import DEADLINE, run

pytestmark = pytest.mark.timeout(90)


async def test_serve_a2a_until_sigterm(tmp_path: Path) -> None:
    settings = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        models={"default": {"type": "scripted", "turns": ["Hi from the agent."]}},
    )
    agent = await start_agent_service(settings, address="127.0.0.1:0")
    try:
        async with hookmesh_process(
            "serve", "a2a", "--listen", "127.0.0.1:0", "--agent", f"127.0.0.1:{agent.port}",
            "--grpc-listen", "127.0.0.1:0", ready="a2a server listening on ",
        ) as server:  # fmt: skip
            assert server.address.startswith("127.0.0.1:")
            url = f"http://{server.address}"
            async with httpx.AsyncClient(timeout=DEADLINE) as http:
                card = await A2ACardResolver(http, url).get_agent_card()
            assert {i.protocol_binding for i in card.supported_interfaces} == {
                "JSONRPC",
                "HTTP+JSON",
                "GRPC",
            }
            client = await create_client(card, client_config=ClientConfig(streaming=False))
            message = Message(
                role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="hi")]
            )
            async with asyncio.timeout(DEADLINE):
                (response,) = [
                    e async for e in client.send_message(SendMessageRequest(message=message))
                ]
            await client.close()
            assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
            assert response.task.artifacts[0].parts[0].text == "Hi from the agent."
        assert server.process.returncode == 0  # a clean stop at SIGTERM
    finally:
        await agent.stop(None)


async def test_a_bad_grpc_address_is_a_usage_error() -> None:
    code, _, err = await run("serve", "a2a", "--grpc-listen", "nowhere")
    assert code == 2
    assert (
        err.strip() == "error: --grpc-listen 'nowhere' is not host:port (port 0 picks a free one)"
    )
