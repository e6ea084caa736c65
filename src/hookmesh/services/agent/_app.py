"""Building and starting the agent service from its configuration."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hookmesh._imports import load_object
from hookmesh.agent import Tool, tool
from hookmesh.agent.models import build_model
from hookmesh.middleware import Middleware
from hookmesh.remote import ClientTLS, RemoteMiddleware, load_middleware
from hookmesh.services._server import RunningServer, Service, start_server
from hookmesh.services.agent._config import (
    AgentServiceConfig,
    LocalMiddlewareConfig,
    SessionsConfig,
    secret,
)
from hookmesh.services.agent._servicer import AgentServicer
from hookmesh.services.agent._store import SessionStore, open_store
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc

log = logging.getLogger("hookmesh.agent_service")

_DRAIN_TIMEOUT = 10.0
SERVICE_NAME = _agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def load_tool(spec: str) -> Tool:
    """A tool from an import path (a `Tool`, or a plain function made into one)."""
    target = load_object(spec)
    if isinstance(target, Tool):
        return target
    if callable(target):
        return tool(target)  # type: ignore[no-any-return]
    raise ValueError(f"{spec!r} is a {type(target).__name__}, not a tool")


@dataclass
class AgentService:
    """A running agent service: its server, servicer and what to close on shutdown."""

    server: RunningServer
    servicer: AgentServicer
    resources: AsyncExitStack

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    async def stop(self, grace: float | None) -> None:
        """Stop accepting calls, let in-flight replies finish for `grace` s, then interrupt
        them; sessions are persisted as each reply ends. Resources close even when a reply
        does not end in time."""
        try:
            await self.server.stop(grace)
            await self.servicer.drain(_DRAIN_TIMEOUT)
        except TimeoutError:
            log.warning("replies still running %.0f s after the grace period", _DRAIN_TIMEOUT)
        finally:
            await self.resources.aclose()


async def sweep_once(store: SessionStore, servicer: AgentServicer, config: SessionsConfig) -> None:
    """Apply the retention policy once (a failure is logged: retention tries again later)."""
    older = (
        datetime.now(UTC) - timedelta(seconds=config.ttl_seconds)
        if config.ttl_seconds is not None
        else None
    )
    try:
        gone = await store.sweep(older_than=older, keep=config.max_count, busy=servicer.busy())
    except Exception as exc:
        log.warning("session sweep failed: %s", exc)
        return
    if gone:
        log.info("retention deleted %d sessions", gone)


async def sweep_sessions(
    store: SessionStore, servicer: AgentServicer, config: SessionsConfig
) -> None:
    """Apply the retention policy every `sweep_interval_seconds`, until cancelled."""
    while True:
        await asyncio.sleep(config.sweep_interval_seconds)
        await sweep_once(store, servicer, config)


async def build_middlewares(
    config: AgentServiceConfig, stack: AsyncExitStack, sidecars: dict[str, str]
) -> list[Middleware]:
    """Instantiate local middlewares and connect remote ones (closed by `stack`)."""
    out: list[Middleware] = []
    for i, entry in enumerate(config.middlewares):
        if isinstance(entry, LocalMiddlewareConfig):
            local = load_middleware(entry.import_path, **entry.params)
            start = getattr(local, "start", None)
            if start is not None:  # e.g. MCP tools: connect before the first reply
                await start()
            aclose = getattr(local, "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
            out.append(local)
            continue
        target = entry.target or sidecars.get(entry.sidecar, "")
        if not target:
            known = ", ".join(sidecars) or "none"
            raise ValueError(f"middlewares[{i}]: set target, or sidecar to one of: {known}")
        tls = None
        if entry.tls is not None:
            tls = ClientTLS(
                entry.tls.ca_cert,
                entry.tls.client_cert,
                entry.tls.client_key,
                entry.tls.server_name,
            )
        remote = await RemoteMiddleware.connect(
            target,
            failure_mode=entry.failure_mode,
            timeout=entry.timeout,
            tls=tls,
            token=secret(entry.token_env),
        )
        stack.push_async_callback(remote.aclose)
        out.append(remote)
    return out


async def start_agent_service(
    config: AgentServiceConfig,
    *,
    address: str | None = None,
    sidecars: dict[str, str] | None = None,
) -> AgentService:
    """Build everything the config names and start serving (health, reflection, tracing).

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        sidecars: Addresses of named sidecars, for remote middlewares that name one.
    """
    stack = AsyncExitStack()
    try:
        store = open_store(config.store)
        stack.push_async_callback(store.close)
        models = {name: build_model(m) for name, m in config.models.items()}
        for model in models.values():
            aclose: Any = getattr(model, "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
        tools = [load_tool(spec) for spec in config.tools]
        middlewares = await build_middlewares(config, stack, sidecars or {})
        servicer = AgentServicer(config, store, models, tools, middlewares)
        if config.sessions.ttl_seconds is not None or config.sessions.max_count is not None:
            await sweep_once(store, servicer, config.sessions)
            sweeper = asyncio.create_task(sweep_sessions(store, servicer, config.sessions))
            stack.push_async_callback(_cancel, sweeper)
        server = await start_server(
            [Service(SERVICE_NAME, servicer, _agent_grpc.add_AgentServiceServicer_to_server)],
            address or config.listen,
            auth=config.auth,
            options=[("grpc.max_receive_message_length", 2 * config.max_request_bytes)],
        )
    except BaseException:
        await stack.aclose()
        raise
    return AgentService(server, servicer, stack)
