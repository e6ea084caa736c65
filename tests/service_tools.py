"""Tools the agent-service tests load by import path (the service runs in the test's process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hookmesh.agent import external_tool, tool
from hookmesh.services.agent import load_config, start_agent_service


class GateState:
    """Events a test arms before a reply, so it can hold a tool open without sleeping."""

    started: asyncio.Event
    release: asyncio.Event

    @classmethod
    def reset(cls) -> None:
        cls.started = asyncio.Event()
        cls.release = asyncio.Event()


@tool(name="gate")
async def gate() -> str:
    """Wait until the test releases the gate."""
    GateState.started.set()
    await GateState.release.wait()
    return "released"


@tool(needs_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file (asks the user first).

    Args:
        path: Which file.
    """
    return f"deleted {path}"


ask_user = external_tool(
    "ask_user",
    "Ask the user a question (the caller answers).",
    {"type": "object", "properties": {"question": {"type": "string"}}},
)
"""An external tool: a reply calling it pauses for the caller's result."""


@asynccontextmanager
async def confirming_service(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model asks to delete /tmp/x (a call that needs the user's
    confirmation), then answers "done"; yields its address."""
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        tools=["tests.service_tools:delete_file"],
        models={
            "default": {
                "type": "scripted",
                "turns": [
                    {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
                    "done",
                ],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


@tool(name="long_report", read_only=True)
def long_report() -> str:
    """A report longer than the reduction tests' limit, so it is offloaded."""
    return "report line\n" * 40


def cleaning_team() -> Any:
    """A supervisor (for ``type: local``) whose worker ``ops`` supervises the worker
    ``janitor``, whose `delete_file` needs the user's confirmation: an ask two levels down.
    The workers' scripted models play one task each (a fresh team per service)."""
    from hookmesh.middleware.builtin.supervisor import SupervisorMiddleware, Worker
    from hookmesh.models import ScriptedChatModel, ScriptedTurn

    janitor = Worker(
        "janitor",
        ScriptedChatModel(
            [ScriptedTurn(tool_calls=[("delete_file", {"path": "tmp/a"})]), "Deleted tmp/a."]
        ),
        "Deletes files.",
        tools=[delete_file],
    )
    ops_model = ScriptedChatModel(
        [ScriptedTurn(tool_calls=[("ask_janitor", {"task": "Delete tmp/a."})]), "Ops: clean."]
    )
    ops = Worker(
        "ops", ops_model, "Runs operations.", middlewares=[SupervisorMiddleware([janitor])]
    )
    return SupervisorMiddleware([ops])


@asynccontextmanager
async def team_service(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model gives ``ops`` a task (`cleaning_team`), then answers
    "All clean."; yields its address."""
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        middlewares=[{"type": "local", "import": "tests.service_tools:cleaning_team"}],
        models={
            "default": {
                "type": "scripted",
                "turns": [
                    {"tool_calls": [{"name": "ask_ops", "arguments": {"task": "Clean tmp."}}]},
                    "All clean.",
                ],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


locate = external_tool(
    "locate",
    "Where the user is (the user's device answers).",
    {"type": "object", "properties": {"precision": {"type": "string"}}},
)
"""An external tool of `locating_team`'s worker."""


def _scout(messages: Any, tools: Any, choice: Any) -> Any:
    """Locate the user, then say where they are (from the result, so a fresh model on
    another service plays the rest of a resumed reply)."""
    from hookmesh.models import ScriptedTurn
    from hookmesh.schema import tool_results

    got = tool_results(messages[-1]) if messages else []
    if got:
        return ScriptedTurn(f"The user is in {got[0].text}.")
    (name,) = [t["name"] for t in tools if t["name"] in ("locate", "get_location")]
    return ScriptedTurn(tool_calls=[(name, {"precision": "city"})])


def locating_team() -> Any:
    """A supervisor (for ``type: local``) whose worker ``scout`` calls the external tool
    `locate`: an external call one level down."""
    from hookmesh.middleware.builtin.supervisor import SupervisorMiddleware, Worker
    from hookmesh.models import ScriptedChatModel

    scout = Worker("scout", ScriptedChatModel(_scout), "Finds the user.", tools=[locate])
    return SupervisorMiddleware([scout])


get_location = external_tool(
    "get_location",
    "The user's location (the chat page's front-end tool answers).",
    {"type": "object", "properties": {"precision": {"type": "string"}}},
)
"""An external tool named as the chat page's front-end tool."""


def browser_locating_team() -> Any:
    """`locating_team` whose worker calls `get_location`, which a browser runs."""
    from hookmesh.middleware.builtin.supervisor import SupervisorMiddleware, Worker
    from hookmesh.models import ScriptedChatModel

    scout = Worker("scout", ScriptedChatModel(_scout), "Finds the user.", tools=[get_location])
    return SupervisorMiddleware([scout])


@asynccontextmanager
async def external_service(
    tmp_path: Path, team: bool, kind: str = "flat", factory: str = "locating_team"
) -> AsyncIterator[str]:
    """A live agent service of message kind `kind` whose reply pauses on an external call,
    then answers "Thanks.": with `team`, its model asks the worker ``scout`` (`factory`:
    `locating_team`, whose worker calls `locate`, or `browser_locating_team`), whose call is
    passed up as ``external_scout``; else it calls `ask_user` itself. Yields its address."""
    call = (
        ("ask_scout", {"task": "Locate the user."}) if team else ("ask_user", {"question": "Who?"})
    )
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        agent={"kind": kind},
        tools=[] if team else ["tests.service_tools:ask_user"],
        middlewares=[{"type": "local", "import": f"tests.service_tools:{factory}"}] if team else [],
        models={
            "default": {
                "type": "scripted",
                "turns": [{"tool_calls": [{"name": call[0], "arguments": call[1]}]}, "Thanks."],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)
