"""A live agent service and AG-UI gateway on loopback for the gateway, Node and browser
tests, with a scripted model that reacts to what the user asks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hookmesh.models import ScriptedChatModel, ScriptedTurn, ToolChoice
from hookmesh.schema import AgenticMessage, Message, is_user, text_of, tool_results
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.services.agui import AguiGateway, load_agui_config, start_agui_gateway

TIMEOUT = 20.0
"""Seconds one HTTP run may take in a test."""


def _media(messages: Sequence[Message]) -> list[Any]:
    last = messages[-1]
    blocks = last.blocks if isinstance(last, AgenticMessage) else last.parts
    return [b for b in blocks if b.type in ("image", "audio", "video", "document")]


MARKDOWN = (
    "Here is **bold** text and a list:\n\n- one\n- two\n\n"
    '<img src="x" onerror="window.pwned = 1"> <script>window.pwned = 2</script>'
)
"""The answer to "markdown": Markdown, and HTML a sanitiser must strip."""


def script(
    messages: Sequence[Message], unused_tools: Sequence[dict[str, Any]], unused: ToolChoice
) -> ScriptedTurn:
    """The test agent: answers a tool result with its text, and otherwise reacts to keywords
    of the last user message (weather: a server tool; delete: a tool needing confirmation;
    where: the front-end tool; gate: a tool the test holds open;
    fail: a model error; markdown: `MARKDOWN`; an attached image: describes it)."""
    last = messages[-1]
    results = tool_results(last)
    if results:
        return ScriptedTurn(text=f"The tool said: {results[-1].text}")
    text = text_of(last).lower() if is_user(last) else ""
    media = _media(messages)
    if media:
        block = media[0]
        size = len(getattr(block.source, "data", b""))
        return ScriptedTurn(text=f"I see an {block.type} ({block.source.mime_type}, {size} bytes).")
    if "weather" in text:
        return ScriptedTurn(
            text="Let me check.",
            reasoning="The user wants the weather.",
            tool_calls=[("get_weather", {"city": "Oslo"})],
        )
    if "delete" in text:
        return ScriptedTurn(tool_calls=[("delete_file", {"path": "notes.txt"})])
    if "where" in text:
        return ScriptedTurn(tool_calls=[("get_location", {"precision": "city"})])
    if "gate" in text:
        return ScriptedTurn(tool_calls=[("gate", {})])
    if "fail" in text:
        return ScriptedTurn(error="the model is out of order")
    if "markdown" in text:
        return ScriptedTurn(text=MARKDOWN)
    return ScriptedTurn(text=f"Hello! You said: {text_of(last)}")


@dataclass
class Stack:
    """A running agent service and gateway."""

    agent: AgentService
    gateway: AguiGateway

    @property
    def url(self) -> str:
        """The gateway's base URL."""
        return f"http://127.0.0.1:{self.gateway.port}"


@asynccontextmanager
async def agui_stack(data_dir: Path, **gateway: Any) -> AsyncIterator[Stack]:
    """Start the agent service (SQLite in `data_dir`, the `script` model streaming) and a
    gateway in front of it (`gateway` overrides its config); both stop at the end."""
    settings = load_config(
        None,
        store=f"sqlite:///{data_dir}/agent.db",
        tools=[
            "hookmesh.suite.demo:get_weather",
            "tests.service_tools:delete_file",
            "tests.service_tools:gate",
        ],
        grace_seconds=0.5,
    )
    agent = await start_agent_service(settings, address="127.0.0.1:0")
    agent.servicer.models["default"] = ScriptedChatModel(script, stream=True, chunk_size=6)
    try:
        config = load_agui_config(None, agent=f"127.0.0.1:{agent.port}", **gateway)
        running = await start_agui_gateway(config, address="127.0.0.1:0")
        try:
            yield Stack(agent, running)
        finally:
            await running.stop(0.5)
    finally:
        await agent.stop(0.5)


def run_input(thread_id: str, run_id: str, messages: list[Any], **fields: Any) -> dict[str, Any]:
    """A RunAgentInput."""
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **fields,
    }


def sse_events(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body (comments skipped)."""
    out = []
    for frame in body.split("\n\n"):
        data = [line[5:].lstrip() for line in frame.split("\n") if line.startswith("data:")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


async def post_run(
    client: httpx.AsyncClient, body: dict[str, Any], **headers: str
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST a run; the response and its events."""
    response = await client.post("/agui", json=body, headers=headers, timeout=TIMEOUT)
    return response, sse_events(response.text)
