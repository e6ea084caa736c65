"""The user MCP tools act for: in the default suite (no tokens) the memory middleware's user,
so what `remember` stores over MCP, `recall` over MCP and the agent's memory both see, and a
memory added with `hookmesh memory add --user me` is recalled over MCP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from hookmesh.client import MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.suite import default_suite_config
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(120)


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def _suite_mcp(tmp_path: Path) -> dict[str, Any]:
    """The default suite's MCP overrides, and the user its memory middleware remembers for."""
    config = default_suite_config(tmp_path)
    [memory] = [
        m
        for m in config.middlewares
        if m.model_dump().get("import_path", "").endswith("memory:MemoryMiddleware")
    ]
    return {**config.services["mcp"], "agent_user": memory.model_dump()["params"]["user_id"]}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, str, str]]:
    """A memory service without tokens and an MCP server configured as the suite's; yields
    the memory address, the MCP URL and the suite's agent user."""
    suite = _suite_mcp(tmp_path)
    memory = await start_memory_service(
        load_memory_config(None, store=f"sqlite:///{tmp_path}/m.db"), address="127.0.0.1:0"
    )
    settings = load_mcp_settings(
        None,
        transport="http",
        memory=f"127.0.0.1:{memory.port}",
        retrieval=None,
        tts=None,
        user=suite["user"],
    )
    mcp = await start_mcp_http_server(settings, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{memory.port}", f"http://127.0.0.1:{mcp.port}/mcp", suite["agent_user"]
    finally:
        await mcp.stop(0.5)
        await memory.stop(None)


async def test_the_suite_mcp_recalls_what_was_remembered_for_the_agents_user(
    served: tuple[str, str, str],
) -> None:
    memory, url, agent_user = served
    async with MemoryClient(memory, timeout=SHORT_TIMEOUT) as client:
        await client.add(MemoryScope(agent_user), facts=["The user prefers green tea."])
    async with Client(url, cache=None) as mcp:
        said = await mcp.call_tool("remember", {"fact": "The user keeps two cats."})
        assert not said.is_error, _text(said)
        tea = _text(await mcp.call_tool("recall", {"query": "what does the user drink"}))
        cats = _text(await mcp.call_tool("recall", {"query": "which pets"}))
    assert "green tea" in tea
    assert "two cats" in cats
    async with MemoryClient(memory, timeout=SHORT_TIMEOUT) as client:
        page = await client.list(MemoryScope(agent_user))
    assert {m.text for m in page.memories} == {
        "The user prefers green tea.",
        "The user keeps two cats.",
    }
