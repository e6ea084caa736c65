"""The three HTTP gateways (AG-UI, A2A, MCP) live on loopback in front of one agent service,
with the same HTTP settings, and what a test needs to speak to each: its JSON route, a
valid request, raw HTTP exchanges."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hookmesh.models import ScriptedChatModel
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from tests.agui_stack import run_input, script, sse_events

WAIT = 20.0
"""Seconds one exchange may take."""
NAMES = ("agui", "a2a", "mcp")

ROUTES = {"agui": "/agui", "a2a": "/", "mcp": "/mcp"}
"""Where each gateway takes its JSON posts."""
_MCP_ACCEPT = "application/json, text/event-stream"


def valid_body(name: str) -> dict[str, Any]:
    """A request each gateway serves: a run, a message/send, an MCP initialize."""
    if name == "agui":
        message = {"id": uuid.uuid4().hex, "role": "user", "content": "hello"}
        return run_input(uuid.uuid4().hex, uuid.uuid4().hex, [message])
    if name == "a2a":
        message = {
            "kind": "message",
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": "hello"}],
        }
        return {
            "jsonrpc": "2.0",
            "id": "1",
            "method": "message/send",
            "params": {"message": message},
        }
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "doors", "version": "1"},
        },
    }


def headers_for(name: str) -> dict[str, str]:
    """Headers a real client of `name` sends with a JSON post."""
    return {"accept": _MCP_ACCEPT} if name == "mcp" else {}


@dataclass
class Gateways:
    """The gateways' ports by name."""

    ports: dict[str, int]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    async def served(self, name: str) -> bool:
        """Whether `name` serves a valid request to its end right now."""
        async with httpx.AsyncClient(base_url=self.url(name), timeout=WAIT) as http:
            answer = await http.post(ROUTES[name], json=valid_body(name), headers=headers_for(name))
        if answer.status_code != 200:
            return False
        if name == "agui":
            return sse_events(answer.text)[-1]["type"] == "RUN_FINISHED"
        if name == "a2a":
            return bool(answer.json()["result"]["status"]["state"] == "completed")
        return "serverInfo" in answer.text


@asynccontextmanager
async def gateways(data_dir: Path, **http: Any) -> AsyncIterator[Gateways]:
    """An agent service (the gateway tests' scripted model) and the three gateways in front
    of it, each with the HTTP settings `http`; all stopped at the end."""
    agent = await start_agent_service(
        load_config(None, store=f"sqlite:///{data_dir}/agent.db", grace_seconds=0.5),
        address="127.0.0.1:0",
    )
    agent.servicer.models["default"] = ScriptedChatModel(script)
    target = f"127.0.0.1:{agent.port}"
    started: list[Any] = []
    try:
        started.append(
            await start_agui_gateway(
                load_agui_config(None, agent=target, **http), address="127.0.0.1:0"
            )
        )
        started.append(
            await start_a2a_server(
                load_a2a_config(None, agent=target, **http), address="127.0.0.1:0"
            )
        )
        mcp = load_mcp_settings(
            None, transport="http", retrieval=None, memory=None, tts=None, **http
        )
        started.append(await start_mcp_http_server(mcp, address="127.0.0.1:0"))
        yield Gateways({name: s.port for name, s in zip(NAMES, started, strict=True)})
    finally:
        for server in reversed(started):
            await server.stop(0.5)
        await agent.stop(0.5)


@dataclass
class RawAnswer:
    """An HTTP answer read off the socket until the server closed it."""

    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> dict[str, Any]:
        """The JSON error every gateway refusal carries."""
        return json.loads(self.body)["error"]  # type: ignore[no-any-return]


def parse(data: bytes) -> RawAnswer:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return RawAnswer(int(lines[0].split()[1]), headers, body)


async def exchange(port: int, request: bytes) -> RawAnswer:
    """Send `request` as is and read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(WAIT):
            return parse(await reader.read())
    finally:
        writer.close()


def post(path: str, body: bytes, *, host: str = "127.0.0.1", **headers: str) -> bytes:
    """A raw HTTP/1.1 POST that asks the server to close after answering."""
    lines = [f"POST {path} HTTP/1.1", f"host: {host}", f"content-length: {len(body)}"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
