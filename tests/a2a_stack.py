"""A live agent service and A2A server (HTTP and gRPC) on loopback, with the scripted model of
the gateway tests (weather: a tool; delete: a tool needing confirmation; gate: a tool the test
holds open)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookmesh.models import ScriptedChatModel
from hookmesh.services.a2a import A2AServer, load_a2a_config, start_a2a_server
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from tests.agui_stack import script


@dataclass
class A2AStack:
    """A running agent service and A2A server."""

    agent: AgentService
    server: A2AServer
    store: str
    """The A2A server's task store."""

    @property
    def url(self) -> str:
        """The A2A server's base URL."""
        return f"http://127.0.0.1:{self.server.port}"


@asynccontextmanager
async def a2a_stack(
    data_dir: Path,
    agent: dict[str, Any] | None = None,
    model: Any = script,
    store: str = "",
    **server: Any,
) -> AsyncIterator[A2AStack]:
    """Start the agent service (SQLite in `data_dir`, `model` as its scripted model) and an
    A2A server with gRPC in front of it (its tasks in `store`, by default SQLite in
    `data_dir`); `agent` overrides the agent service's config, `server` the A2A server's.
    Both stop at the end."""
    settings: dict[str, Any] = {
        "store": f"sqlite:///{data_dir}/agent.db",
        "tools": [
            "hookmesh.suite.demo:get_weather",
            "tests.service_tools:delete_file",
            "tests.service_tools:gate",
        ],
        "agent": {"name": "weather-desk", "description": "Knows the weather."},
        "grace_seconds": 0.5,
        **(agent or {}),
    }
    service = await start_agent_service(load_config(None, **settings), address="127.0.0.1:0")
    service.servicer.models["default"] = ScriptedChatModel(model, stream=True, chunk_size=6)
    try:
        store = store or f"sqlite:///{data_dir}/a2a.db"
        config = load_a2a_config(None, agent=f"127.0.0.1:{service.port}", store=store, **server)
        running = await start_a2a_server(config, address="127.0.0.1:0", grpc_address="127.0.0.1:0")
        try:
            yield A2AStack(service, running, store)
        finally:
            await running.stop(0.5)
    finally:
        await service.stop(0.5)


def delegating(peer: str) -> Any:
    """A scripted agent that delegates to the remote agent tool `peer`: "ask <peer> ..." sends
    the rest to it; "weather" asks `peer` when the agent has no weather tool (the other side
    does), "delete" deletes (confirmation); a result of `peer` (or of its confirmation) is answered
    "<peer> says: ...";
    anything else is answered by the gateway tests' `script`."""

    def play(messages: Any, tools: Any, choice: Any) -> Any:
        from hookmesh.models import ScriptedTurn
        from hookmesh.schema import is_user, text_of, tool_results

        last = messages[-1]
        for result in tool_results(last):
            if result.name in (peer, f"{peer}__confirm"):
                return ScriptedTurn(text=f"{peer} says: {result.text}")
        text = text_of(last) if is_user(last) else ""
        names = {t["name"] for t in tools}
        if text.lower().startswith(f"ask {peer} "):
            return ScriptedTurn(tool_calls=[(peer, {"message": text[len(peer) + 5 :]})])
        if "weather" in text.lower() and "get_weather" not in names:
            return ScriptedTurn(tool_calls=[(peer, {"message": "what is the weather"})])
        return script(messages, tools, choice)

    return play
