"""MCP tools: every tool of the configured MCP servers, as tools of the agent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp.types as mcp_types
from mcp import MCPError

from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView, ReplyArgs, ReplyNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._tool_io import Lifecycle
from hookmesh.middleware.builtin.mcp_tools._connection import (
    McpConnection,
    McpServerConfig,
    McpUnavailableError,
)
from hookmesh.middleware.builtin.mcp_tools._content import result_blocks
from hookmesh.schema import AgentEvent, CustomEvent, TextBlock, ToolOutputBlock
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece

log = logging.getLogger("hookmesh.middleware.mcp_tools")

WARNING_EVENT = "mcp.warning"
"""Name of the custom event saying a server's tools are missing from a reply."""


class McpServerUnavailableError(HookmeshError):
    """A server of a fail_closed MCP tools middleware is not connected."""

    reason = "MCP_SERVER_UNAVAILABLE"


class McpToolError(ToolError):
    """An MCP call failed (the tool answered ``isError``, or the server could not be
    called): its error result holds the server's content as it is, or what went wrong."""


@dataclass(frozen=True, slots=True)
class _Route:
    """Where one agent tool goes: a server and the tool's name there."""

    connection: McpConnection
    name: str


class McpToolsMiddleware(Lifecycle, Middleware):
    """Gives the agent the tools of MCP servers, over stdio (a command) or streamable HTTP
    (a URL), with the official ``mcp`` SDK.

    `start` (or ``async with``) connects to every server and lists its tools; the sessions
    are kept for every reply and closed by `aclose` (a stdio server is stopped, and any
    process it left running is killed). Each tool keeps its JSON schema; its name is the
    server's, or ``server__tool`` when two servers share it (or the server says
    ``namespace``); the allow and deny lists pick tools per server. Annotations become
    tool flags: ``readOnlyHint`` → ``read_only`` and ``concurrency_safe``; a tool that may
    be destructive (``destructiveHint`` true or unset, as MCP defaults it, unless it is
    read-only) gets ``needs_confirmation`` (per server: ``confirm``), so the permission
    check asks the user before calling it. A call has the server's timeout; its content
    (text, images, audio, embedded resources, resource links) becomes tool-result blocks
    on both message kinds, and ``isError`` an error result. A server's tool-list change
    reaches the next reply.

    A server that is down at start or lost later is reconnected in the background every
    `retry_seconds`. Until it is back: ``fail_open`` (its tools are absent; each reply
    starts with a ``mcp.warning`` custom event naming it and why) or ``fail_closed``
    (`start` fails; a reply ends with ``MCP_SERVER_UNAVAILABLE``).

    Hooks: `on_reply` (only when a server is down); each tool's run calls its server, so
    other tool calls never reach this middleware. State: none per reply; the sessions and
    tool lists live on the instance, shared by every agent. In a sidecar the tools run
    through ``CallTool``; the tool list is the one at the sidecar's start (Describe is read
    once), and a sidecar serving it must be started with `start` (``hookmesh sidecar`` does).

    Example:
        >>> mw = McpToolsMiddleware([{"name": "files", "command": "mcp-files", "args": ["/srv"]}])
        >>> [c.name for c in mw.servers]
        ['files']

    Args:
        servers: `McpServerConfig`s, or mappings of their fields.
        separator: Between server and tool name in a namespaced name (tool names must match
            ``[A-Za-z0-9_-]`` for most model APIs, so not ``.``).
        retry_seconds: Wait before reconnecting a lost server.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {
        # NOTE(hookmesh): a sidecar's emits reach the agent with its next answer; the second
        # subscription makes that answer come before the first model call, not at the end.
        "on_reply": ("reply_start", "model_call_start"),
    }

    def __init__(
        self,
        servers: Sequence[McpServerConfig | Mapping[str, Any]],
        *,
        separator: str = "__",
        retry_seconds: float = 30.0,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.servers = [
            s if isinstance(s, McpServerConfig) else McpServerConfig.model_validate(s)
            for s in servers
        ]
        names = [s.name for s in self.servers]
        if not names or len(set(names)) != len(names):
            raise ValueError("servers must be at least one server, with unique names")
        self.separator = separator
        self.retry_seconds = check.positive("retry_seconds", retry_seconds)
        self.failure_mode = check.failure(failure_mode)
        self._connections = [
            McpConnection(s, self._rebuild, self.retry_seconds) for s in self.servers
        ]
        self._tools: list[Tool] = []
        self._routes: dict[str, _Route] = {}
        self._changed = asyncio.Event()

    def middleware_key(self) -> str:
        return "mcp_tools"

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to every server (concurrently) and list its tools.

        Raises:
            McpServerUnavailableError: fail_closed, and a server could not be reached.
        """
        await asyncio.gather(*(c.start() for c in self._connections))
        down = self.unavailable()
        if down and self.failure_mode == "fail_closed":
            await self.aclose()
            raise McpServerUnavailableError(_down_text(down), metadata={"server": down[0][0]})
        for name, error in down:
            log.warning("MCP server %s is unavailable, its tools are left out: %s", name, error)

    async def aclose(self) -> None:
        """Close every session (stdio servers stop; nothing they started is left running)."""
        await asyncio.gather(*(c.close() for c in self._connections))

    async def changed(self) -> None:
        """Wait until the tools or a server's availability change next."""
        await self._changed.wait()

    def unavailable(self) -> list[tuple[str, str]]:
        """(server, why) for every server that is not connected."""
        return [(c.config.name, c.error) for c in self._connections if c.error is not None]

    # --- tools -----------------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _rebuild(self) -> None:
        """Recompute the tools after a server connected, changed its tools or went away."""
        chosen = [(c, t) for c in self._connections for t in c.tools if c.config.wants(t.name)]
        counts: dict[str, int] = {}
        for _, t in chosen:
            counts[t.name] = counts.get(t.name, 0) + 1
        tools: list[Tool] = []
        routes: dict[str, _Route] = {}
        for connection, t in chosen:
            name = t.name
            if connection.config.namespace or counts[name] > 1:
                name = f"{connection.config.name}{self.separator}{t.name}"
            if name in routes:
                log.warning("MCP tool %s is listed twice; the first is kept", name)
                continue
            route = _Route(connection, t.name)
            routes[name] = route
            tools.append(self._tool(name, t, route))
        self._tools, self._routes = tools, routes
        self._changed.set()
        self._changed = asyncio.Event()

    def _tool(self, name: str, t: mcp_types.Tool, route: _Route) -> Tool:
        hints = t.annotations or mcp_types.ToolAnnotations()
        read_only = hints.read_only_hint is True
        confirm = route.connection.config.confirm
        destructive = not read_only and hints.destructive_hint is not False
        needs_confirmation = confirm == "always" or (confirm == "destructive" and destructive)

        async def run(
            context: ToolContext[AgentView] | None = None, **arguments: Any
        ) -> AsyncIterator[ToolPiece]:
            key = context.idempotency_key if context is not None else ""
            blocks, ok = await self._call(route, arguments, key)
            if not ok:
                raise McpToolError(blocks)
            for block in blocks:
                yield block

        return Tool(
            name=name,
            description=t.description or t.title or t.name,
            parameters=dict(t.input_schema) or {"type": "object", "properties": {}},
            func=run,
            read_only=read_only,
            concurrency_safe=read_only,
            needs_confirmation=needs_confirmation,
        )

    async def _call(
        self, route: _Route, arguments: dict[str, Any], key: str
    ) -> tuple[list[ToolOutputBlock], bool]:
        """The tool's output and whether it succeeded; a failure to call it is an error
        result the model can read, never an exception. `key`: the call's idempotency key,
        sent in the request's ``_meta``."""
        server = route.connection.config.name
        try:
            result = await route.connection.call(route.name, arguments, key)
            return result_blocks(result)
        except McpUnavailableError as exc:
            text = str(exc)
        except TimeoutError:
            text = f"MCP server {server} did not answer within {route.connection.config.timeout} s"
        except MCPError as exc:
            text = f"MCP server {server} refused the call: {exc.message}"
        except ValueError as exc:
            text = f"MCP server {server} sent a malformed result: {exc}"
        return [TextBlock(text=f"Error: {text}")], False

    # --- hooks -----------------------------------------------------------------------------

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Pass the reply through untouched while every server is connected; otherwise warn
        (fail_open) or fail (fail_closed) right after reply_start.

        Boundary: wraps the whole reply; costs nothing per event while no server is down.
        """
        down = self.unavailable()
        if not down:
            return next_handler()
        return self._degraded(agent, down, next_handler())

    async def _degraded(
        self, agent: AgentView, down: list[tuple[str, str]], events: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        warned = False
        async for event in events:
            yield event
            if not warned and event.type == "reply_start" and not event.source_path:
                warned = True
                if self.failure_mode == "fail_closed":
                    raise McpServerUnavailableError(
                        _down_text(down), metadata={"server": down[0][0]}
                    )
                for name, error in down:
                    yield CustomEvent(
                        reply_id=agent.reply_id,
                        name=WARNING_EVENT,
                        value={
                            "server": name,
                            "message": f"the tools of MCP server {name} are unavailable: {error}",
                        },
                    )


def _down_text(down: list[tuple[str, str]]) -> str:
    return "; ".join(f"MCP server {name} is unavailable: {error}" for name, error in down)


__all__ = [
    "WARNING_EVENT",
    "McpServerConfig",
    "McpServerUnavailableError",
    "McpToolError",
    "McpToolsMiddleware",
]
