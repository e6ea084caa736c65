"""Live middleware reloads: from SIGHUP or the AdminService, new replies take the new chain."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc

from hookmesh.errors import RequestError
from hookmesh.remote import SidecarError
from hookmesh.server import current_principal
from hookmesh.services.agent._chain import MiddlewareChain, build_chain
from hookmesh.services.agent._config import AgentServiceConfig
from hookmesh.services.agent._export import UserExporter
from hookmesh.services.agent._forget import UserEraser
from hookmesh.services.agent._rollouts import find_rollout, rollout_to_pb
from hookmesh.services.agent._servicer import AgentServicer
from hookmesh.services.agent._sidecars import sidecars_to_pb
from hookmesh.v1 import admin_pb2 as _admin_pb2
from hookmesh.v1 import admin_pb2_grpc as _admin_grpc

log = logging.getLogger("hookmesh.agent_service")

ConfigSource = Callable[[], AgentServiceConfig]
"""Reads the service's configuration again (file, environment, flags)."""


def _refused(reason: str, message: str) -> RequestError:
    return RequestError(grpc.StatusCode.FAILED_PRECONDITION, reason, message)


@dataclass
class Reloaded:
    """What a successful reload did."""

    chain: MiddlewareChain
    """The chain new replies take."""
    draining: int
    """Replies still running on the old chain."""
    restart_keys: list[str]
    """Changed top-level keys a reload does not apply."""


class MiddlewareReloader:
    """Builds the chain the configuration describes and swaps it in; one reload at a time.

    Args:
        servicer: The agent servicer whose chain is replaced.
        source: Reads the configuration again; None when the service has none to reread.
        sidecars: Addresses of named sidecars (as at start).
    """

    def __init__(
        self, servicer: AgentServicer, source: ConfigSource | None, sidecars: dict[str, str]
    ) -> None:
        self.servicer = servicer
        self._source = source
        self._sidecars = sidecars
        self._lock = asyncio.Lock()

    async def reload(self) -> Reloaded:
        """Reload the middleware chain.

        Raises:
            RequestError: FAILED_PRECONDITION ``INVALID_CONFIG``, ``SIDECAR_UNAVAILABLE`` or
                ``NO_CONFIG_FILE``; the running chain stays.
        """
        async with self._lock:
            if self._source is None:
                raise _refused("NO_CONFIG_FILE", "this service has no configuration to reload")
            running = self.servicer.config
            try:
                config = self._source()
                generation = self.servicer.chain.generation + 1
                chain = await build_chain(config, self._sidecars, generation)
            except ValueError as exc:
                message = f"the new configuration is invalid: {exc}"
                raise _refused("INVALID_CONFIG", message) from None
            except SidecarError as exc:
                message = f"the new chain cannot start: {exc}"
                raise _refused("SIDECAR_UNAVAILABLE", message) from None
            old = await self.servicer.swap(chain)
            self.servicer.config = running.model_copy(update={"middlewares": config.middlewares})
            restart = sorted(
                key
                for key in type(running).model_fields
                if key != "middlewares" and getattr(running, key) != getattr(config, key)
            )
            log.warning(
                "middlewares reloaded: generation %d (%s); %d replies finish on the old chain%s",
                chain.generation,
                ", ".join(chain.keys()) or "none",
                old.users,
                f"; restart to apply {', '.join(restart)}" if restart else "",
            )
            return Reloaded(chain, old.users, restart)

    async def reload_logged(self) -> None:
        """Reload, logging a refusal instead of raising (SIGHUP has no caller to tell)."""
        try:
            await self.reload()
        except RequestError as exc:
            log.error("middleware reload refused (%s): %s", exc.reason, exc.message)

    def on_sighup(self) -> None:
        """Reload on every SIGHUP of this process (from now until it exits)."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def handle() -> None:
            task = loop.create_task(self.reload_logged())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        loop.add_signal_handler(signal.SIGHUP, handle)


class AdminServicer(_admin_grpc.AdminServiceServicer):
    """The AdminService of an agent service: only `admin_principals` may call it.

    Args:
        reloader: Does the reloads.
        admins: Principals allowed to call.
        eraser: Does the erasures.
        exporter: Does the exports.
    """

    def __init__(
        self,
        reloader: MiddlewareReloader,
        admins: list[str],
        eraser: UserEraser,
        exporter: UserExporter,
    ) -> None:
        self.reloader = reloader
        self.admins = frozenset(admins)
        self.eraser = eraser
        self.exporter = exporter

    def _admin(self) -> str:
        principal = current_principal()
        if principal not in self.admins:
            raise RequestError(
                grpc.StatusCode.PERMISSION_DENIED,
                "ADMIN_ONLY",
                f"principal {principal!r} may not administer this service (see admin_principals)",
                metadata={"principal": principal},
            )
        return principal

    async def ReloadMiddlewares(
        self, request: _admin_pb2.ReloadMiddlewaresRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.ReloadMiddlewaresResponse:
        self._admin()
        done = await self.reloader.reload()
        return _admin_pb2.ReloadMiddlewaresResponse(
            generation=done.chain.generation,
            middleware_keys=done.chain.keys(),
            draining_replies=done.draining,
            restart_keys=done.restart_keys,
        )

    async def ForgetUser(
        self, request: _admin_pb2.ForgetUserRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.ForgetUserResponse:
        caller = self._admin()
        user = request.user_id
        busy = any(owner == user for owner, _ in self.reloader.servicer.busy())
        receipt = await self.eraser.forget(user, busy, caller)
        return _admin_pb2.ForgetUserResponse(
            stores=[_admin_pb2.ErasedStore(store=s, deleted_count=n) for s, n in receipt]
        )

    async def ExportUser(
        self, request: _admin_pb2.ExportUserRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_admin_pb2.ExportUserResponse]:
        caller = self._admin()
        async for batch in self.exporter.batches(request.user_id, caller):
            yield _admin_pb2.ExportUserResponse(
                records=[_admin_pb2.ExportedRecord(store=s, json=j) for s, j in batch]
            )

    # --- rollouts and sidecars -------------------------------------------------------------

    async def DescribeRollouts(
        self, request: _admin_pb2.DescribeRolloutsRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.DescribeRolloutsResponse:
        self._admin()
        chain = self.reloader.servicer.chain
        return _admin_pb2.DescribeRolloutsResponse(
            rollouts=[rollout_to_pb(r, chain.generation) for r in chain.rollouts]
        )

    async def PromoteRollout(
        self, request: _admin_pb2.PromoteRolloutRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.PromoteRolloutResponse:
        caller = self._admin()
        chain = self.reloader.servicer.chain
        rollout = find_rollout(chain.rollouts, request.middleware_key)
        rollout.promote(caller)
        return _admin_pb2.PromoteRolloutResponse(rollout=rollout_to_pb(rollout, chain.generation))

    async def RollbackRollout(
        self, request: _admin_pb2.RollbackRolloutRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.RollbackRolloutResponse:
        caller = self._admin()
        chain = self.reloader.servicer.chain
        rollout = find_rollout(chain.rollouts, request.middleware_key)
        rollout.rollback(caller)
        return _admin_pb2.RollbackRolloutResponse(rollout=rollout_to_pb(rollout, chain.generation))

    async def DescribeSidecars(
        self, request: _admin_pb2.DescribeSidecarsRequest, context: grpc.aio.ServicerContext
    ) -> _admin_pb2.DescribeSidecarsResponse:
        self._admin()
        return _admin_pb2.DescribeSidecarsResponse(
            sidecars=sidecars_to_pb(self.reloader.servicer.chain)
        )
