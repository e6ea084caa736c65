"""Building and starting the agent service from its configuration."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hookmesh._imports import load_object
from hookmesh.agent import Tool, tool
from hookmesh.middleware import ExpiresData
from hookmesh.models import build_model
from hookmesh.server import Clock, RunningServer, Service, Sweeper, start_server, utc_now
from hookmesh.services.agent._chain import build_chain
from hookmesh.services.agent._config import AgentServiceConfig, SessionsConfig
from hookmesh.services.agent._export import UserExporter
from hookmesh.services.agent._forget import UserEraser
from hookmesh.services.agent._open import open_store
from hookmesh.services.agent._reload import AdminServicer, ConfigSource, MiddlewareReloader
from hookmesh.services.agent._servicer import AgentServicer
from hookmesh.services.agent._store import SessionStore
from hookmesh.v1 import admin_pb2 as _admin_pb2
from hookmesh.v1 import admin_pb2_grpc as _admin_grpc
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc

log = logging.getLogger("hookmesh.agent_service")

_DRAIN_TIMEOUT = 10.0
SERVICE_NAME = _agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
ADMIN_SERVICE_NAME = _admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name


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
    """A running agent service: its server, servicer, reloader and what to close on
    shutdown."""

    server: RunningServer
    servicer: AgentServicer
    resources: AsyncExitStack
    reloader: MiddlewareReloader
    expiry: Sweeper
    """The retention of the middlewares' own stores (its first sweep starts with the
    service)."""

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    async def stop(self, grace: float | None) -> None:
        """Stop accepting calls, let in-flight replies finish for `grace` s, then interrupt
        them; sessions are persisted as each reply ends. Resources close even when a reply
        does not end in time."""
        try:
            # NOTE(durability): health says NOT_SERVING and every durable reply is handed over
            # at its next saved step before the server stops, so their callers get
            # REPLY_HANDED_OVER (and re-attach elsewhere) rather than a cancelled call.
            await self.server.health.enter_graceful_shutdown()
            self.servicer.desk.hand_over()
            with contextlib.suppress(TimeoutError):
                await self.servicer.drain(grace if grace is not None else _DRAIN_TIMEOUT)
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
        journal = datetime.now(UTC) - timedelta(seconds=servicer.config.durability.journal_seconds)
        gone = await store.sweep(
            older_than=older, keep=config.max_count, busy=servicer.busy(), journal_before=journal
        )
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


def expire_middleware_data(servicer: AgentServicer) -> Callable[[datetime, int], Awaitable[int]]:
    """The sweep of the stores the current chain's middlewares expire themselves (their
    own retention, `ExpiresData`), at most the given count in all."""

    async def sweep(now: datetime, limit: int) -> int:
        gone = 0
        for middleware in servicer.chain.middlewares:
            if isinstance(middleware, ExpiresData) and gone < limit:
                gone += await middleware.expire(now, limit - gone)
        return gone

    return sweep


async def renew_leases(servicer: AgentServicer, interval: float) -> None:
    """Renew the replies' session leases every `interval` s, until cancelled (a failure is
    logged: the next round tries again before the leases expire)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await servicer.claims.renew()
        except Exception as exc:
            log.warning("session lease renewal failed: %s", exc)


async def start_agent_service(
    config: AgentServiceConfig,
    *,
    address: str | None = None,
    sidecars: dict[str, str] | None = None,
    reload_from: ConfigSource | None = None,
    clock: Clock = utc_now,
) -> AgentService:
    """Build everything the config names and start serving (health, reflection, tracing).

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        sidecars: Addresses of named sidecars, for remote middlewares that name one.
        reload_from: Reads the configuration again for a middleware reload (SIGHUP, the
            AdminService); without it a reload is refused (``NO_CONFIG_FILE``).
        clock: The time the middlewares' retention measures ages against.
    """
    stack = AsyncExitStack()
    try:
        sessions = config.sessions
        store = await open_store(
            config.store, namespace=sessions.namespace, lease_seconds=sessions.lease_seconds
        )
        stack.push_async_callback(store.close)
        models = {name: build_model(m) for name, m in config.models.items()}
        for model in models.values():
            aclose: Any = getattr(model, "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
        tools = [load_tool(spec) for spec in config.tools]
        chain = await build_chain(config, sidecars or {})
        servicer = AgentServicer(config, store, models, tools, chain)
        stack.push_async_callback(lambda: servicer.chain.close())
        if store.leases is not None:
            renewer = asyncio.create_task(renew_leases(servicer, sessions.lease_seconds / 3))
            stack.push_async_callback(_cancel, renewer)
            relay = asyncio.create_task(servicer.claims.relay_interrupts())
            stack.push_async_callback(_cancel, relay)
        await sweep_once(store, servicer, sessions)
        sweeper = asyncio.create_task(sweep_sessions(store, servicer, sessions))
        stack.push_async_callback(_cancel, sweeper)
        expiry = Sweeper(
            "middleware files",
            expire_middleware_data(servicer),
            interval=sessions.sweep_interval_seconds,
            clock=clock,
        )
        expiry.start()
        stack.push_async_callback(expiry.stop)
        # NOTE(durability): replies cut off before this start (a crash of this very process,
        # on SQLite; a dead replica, on PostgreSQL) go on now, then whenever one is found.
        await servicer.desk.adopt_orphans()
        takeover = asyncio.create_task(servicer.desk.take_over())
        stack.push_async_callback(_cancel, takeover)
        reloader = MiddlewareReloader(servicer, reload_from, sidecars or {})
        admin = AdminServicer(
            reloader,
            config.admin_principals,
            UserEraser(store, config.erasure, lambda: servicer.chain.middlewares),
            UserExporter(store, config.erasure, lambda: servicer.chain.middlewares),
        )
        server = await start_server(
            [
                Service(SERVICE_NAME, servicer, _agent_grpc.add_AgentServiceServicer_to_server),
                Service(ADMIN_SERVICE_NAME, admin, _admin_grpc.add_AdminServiceServicer_to_server),
            ],
            address or config.listen,
            auth=config.auth,
            options=[("grpc.max_receive_message_length", 2 * config.max_request_bytes)],
            metrics_listen=config.metrics_listen,
            metrics_allowed_hosts=config.metrics_allowed_hosts,
            metrics_token_env=config.metrics_token_env,
        )
    except BaseException:
        await stack.aclose()
        raise
    return AgentService(server, servicer, stack, reloader, expiry)
