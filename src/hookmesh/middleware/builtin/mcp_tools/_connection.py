"""One MCP server: its configuration, and a session held open by its own task, listening for
tool-list changes and reconnecting after a loss."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable
from typing import Any, Literal

import httpx2
import mcp.types as mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.subscriptions import SubscriptionLost
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hookmesh.middleware.builtin.mcp_tools._processes import MARKER, kill_marked

log = logging.getLogger("hookmesh.middleware.mcp_tools")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_LIST_PAGES = 50
"""Most tools/list pages read from one server (a paginator that never ends cannot hang)."""


class McpServerConfig(BaseModel):
    """One MCP server: a command to run (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Short name: the namespace of its tools (``name__tool``) and in warnings."""
    command: str = ""
    """stdio: the program to run."""
    args: list[str] = Field(default_factory=list)
    """stdio: its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """stdio: extra environment variables (PATH, HOME and the like are inherited)."""
    cwd: str | None = None
    """stdio: its working directory."""
    url: str = ""
    """Streamable HTTP: the endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request."""
    token_env: str | None = None
    """Environment variable holding a bearer token sent as ``Authorization`` (a secret)."""
    allow: list[str] | None = None
    """Only these of its tools (by the server's names); None: all."""
    deny: list[str] = Field(default_factory=list)
    """None of these of its tools."""
    namespace: bool = False
    """Always name its tools ``name__tool`` (otherwise only names two servers share are)."""
    confirm: Literal["destructive", "always", "never"] = "destructive"
    """Which calls ask the user first: ``destructive`` (a tool not marked read-only whose
    ``destructiveHint`` is not false, as MCP defaults it), ``always`` or ``never``."""
    timeout: float = Field(60.0, gt=0)
    """Seconds one tool call may take."""
    connect_timeout: float = Field(15.0, gt=0)
    """Seconds to connect and list the tools."""
    protocol: Literal["auto", "legacy"] = "auto"
    """``auto``: the newest MCP version both sides speak; ``legacy``: the initialize
    handshake (servers before 2026-07-28)."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if not _NAME.fullmatch(self.name):
            raise ValueError("name: use 1-32 characters of A-Z a-z 0-9 _ -")
        if bool(self.command) == bool(self.url):
            raise ValueError(f"server {self.name}: set command (stdio) or url (HTTP), not both")
        if self.command and (self.headers or self.token_env):
            raise ValueError(f"server {self.name}: headers and token_env are for url servers")
        return self

    def wants(self, tool: str) -> bool:
        """Whether its tool `tool` passes the allow and deny lists."""
        return (self.allow is None or tool in self.allow) and tool not in self.deny


IDEMPOTENCY_META = "hookmesh/idempotencyKey"
"""The ``_meta`` key of a tool call's idempotency key (`ToolContext.idempotency_key`)."""


class McpUnavailableError(RuntimeError):
    """The server is not connected (it is down, or reconnecting)."""


class McpConnection:
    """A session with one server, opened and closed by its own task (the SDK's task groups
    must be left by the task that entered them), reused by every reply.

    The task connects, lists the tools, then waits: a tool-list change (a
    ``subscriptions/listen`` event, or ``notifications/tools/list_changed`` on a legacy
    session) lists them again; a lost session is reopened after `retry_seconds`; `close`
    ends it. `on_change` runs after every change of `tools` or `error`.

    Args:
        config: The server.
        on_change: Called (in the event loop) when the tools or the error change.
        retry_seconds: Wait before reconnecting a lost or failed server.
    """

    def __init__(
        self, config: McpServerConfig, on_change: Callable[[], None], retry_seconds: float
    ) -> None:
        self.config = config
        self.tools: list[mcp_types.Tool] = []
        """The server's tools as last listed (empty while it is not connected)."""
        self.error: str | None = "not connected yet"
        """Why the server is unavailable, or None while it is connected."""
        self._on_change = on_change
        self._retry = retry_seconds
        self._client: Client | None = None
        self._wake = asyncio.Event()
        self._dirty = False
        self._lost = False
        self._closing = False
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the session's task and wait for its first connection attempt."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp {self.config.name}")
        await self._first.wait()

    async def close(self, timeout: float = 10.0) -> None:
        """End the session (a stdio server and everything it started are stopped)."""
        self._closing = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def call(
        self, name: str, arguments: dict[str, Any], idempotency_key: str = ""
    ) -> mcp_types.CallToolResult:
        """Call tool `name` within the server's timeout; `idempotency_key` goes in the
        request's ``_meta`` as ``hookmesh/idempotencyKey`` (a server may deduplicate by it).

        Raises:
            McpUnavailableError: The server is not connected, or the session broke.
            TimeoutError: The call took longer than the timeout.
            MCPError: The server refused the call.
        """
        client = self._client
        if client is None:
            raise McpUnavailableError(f"MCP server {self.config.name} is unavailable: {self.error}")
        try:
            async with asyncio.timeout(self.config.timeout):
                meta = {IDEMPOTENCY_META: idempotency_key} if idempotency_key else None
                return await client.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._lose()
                raise McpUnavailableError(
                    f"MCP server {self.config.name} closed the connection"
                ) from None
            raise

    def _lose(self) -> None:
        self._lost = True
        self._wake.set()

    def _set(self, tools: list[mcp_types.Tool], error: str | None) -> None:
        self.tools, self.error = tools, error
        self._on_change()

    # --- the session's task ----------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            run_id = uuid.uuid4().hex
            try:
                await self._session(run_id)
            except Exception as exc:
                reason = _describe(exc)
                if not self._closing:
                    log.warning("MCP server %s is unavailable: %s", self.config.name, reason)
                self._set([], reason)
            finally:
                self._client = None
                self._first.set()
                await asyncio.to_thread(kill_marked, run_id)
            if self._closing:
                return
            if not self.error:
                self._set([], "the connection was lost")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._retry):
                    while not self._closing:
                        self._wake.clear()
                        await self._wake.wait()

    async def _session(self, run_id: str) -> None:
        self._lost = self._dirty = False
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self.config.connect_timeout):
                client = await stack.enter_async_context(self._client_for(run_id, stack))
                tools = await self._list(client)
            self._client = client
            self._set(tools, None)
            self._first.set()
            watcher = None
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                watcher = asyncio.create_task(self._listen(client))
            try:
                while True:
                    await self._wake.wait()
                    self._wake.clear()
                    if self._closing or self._lost:
                        return
                    if self._dirty:
                        self._dirty = False
                        async with asyncio.timeout(self.config.connect_timeout):
                            self._set(await self._list(client), None)
            finally:
                if watcher is not None:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)

    def _client_for(self, run_id: str, stack: contextlib.AsyncExitStack) -> Client:
        c = self.config
        server: Any
        if c.command:
            server = StdioServerParameters(
                command=c.command, args=c.args, env={**c.env, MARKER: run_id}, cwd=c.cwd
            )
        else:
            headers = dict(c.headers)
            token = os.environ.get(c.token_env) if c.token_env else None
            if c.token_env and not token:
                raise McpUnavailableError(f"environment variable {c.token_env} is unset")
            if token:
                headers["Authorization"] = f"Bearer {token}"
            # NOTE(hookmesh): no read timeout: the tools/list_changed stream may stay silent
            # for hours; each call has its own deadline (`call`).
            timeout = httpx2.Timeout(c.connect_timeout, read=None)
            http = httpx2.AsyncClient(headers=headers, timeout=timeout)
            stack.push_async_callback(http.aclose)
            from mcp.client.streamable_http import streamable_http_client

            server = streamable_http_client(c.url, http_client=http)
        return Client(
            server,
            mode=c.protocol,
            read_timeout_seconds=c.timeout,
            message_handler=self._message,
            cache=None,
        )

    async def _list(self, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _listen(self, client: Client) -> None:
        """Watch a 2026-07-28 session's tool list; its stream ending means the session is
        gone (a crashed stdio server ends it at once)."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    self._dirty = True
                    self._wake.set()
        except (SubscriptionLost, MCPError, OSError):
            pass
        self._lose()

    async def _message(self, message: Any) -> None:
        """Legacy sessions: ``notifications/tools/list_changed`` asks for a new listing."""
        notification = getattr(message, "root", message)
        if isinstance(notification, mcp_types.ToolListChangedNotification):
            self._dirty = True
            self._wake.set()


def _describe(exc: BaseException) -> str:
    """A short reason without secrets (an HTTP error names the status, never the headers)."""
    if isinstance(exc, BaseExceptionGroup):
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
