"""`AdminClient`: an operator's client of an agent service's AdminService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from hookmesh._security import ClientTLS
from hookmesh.client._agent_client import MAX_RECEIVE_BYTES
from hookmesh.client._base import ServiceClient
from hookmesh.client._errors import AgentClientError
from hookmesh.v1 import admin_pb2 as _admin_pb2
from hookmesh.v1 import admin_pb2_grpc as _admin_grpc


@dataclass
class ReloadResult:
    """The middleware chain that serves new replies after a reload."""

    generation: int
    """1 for the chain built at start, one more per reload."""
    middleware_keys: list[str]
    """Its middlewares, outermost first."""
    draining_replies: int
    """Replies that finish on the older chain."""
    restart_keys: list[str]
    """Changed config keys a reload does not apply (they need a restart)."""


class AdminClient(ServiceClient):
    """Calls an agent service's AdminService as an admin principal (`admin_principals`).

    Use as ``async with AdminClient("127.0.0.1:7000", timeout=30, token=...) as admin:``.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 30.0,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__(
            target,
            timeout=timeout,
            tls=tls,
            token=token,
            options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)],
        )
        self._stub = _admin_grpc.AdminServiceStub(self._channel)

    async def reload_middlewares(self, *, timeout: float | None = None) -> ReloadResult:
        """Have the service reload its middleware chain from its configuration.

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``, or FAILED_PRECONDITION
                ``INVALID_CONFIG`` / ``SIDECAR_UNAVAILABLE`` / ``NO_CONFIG_FILE`` (the running
                chain stays).
        """
        response = await self._unary(
            self._stub.ReloadMiddlewares, _admin_pb2.ReloadMiddlewaresRequest(), timeout
        )
        return ReloadResult(
            response.generation,
            list(response.middleware_keys),
            response.draining_replies,
            list(response.restart_keys),
        )

    async def forget_user(
        self, user_id: str, *, timeout: float | None = None
    ) -> list[tuple[str, int]]:
        """Erase everything the service's stores keep about `user_id` (docs/security.md,
        "Data lifecycle"); the receipt: (store, rows deleted), zero counts included.

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``, INVALID_ARGUMENT
                ``INVALID_USER_ID``, FAILED_PRECONDITION ``USER_REPLY_RUNNING`` (nothing
                erased), UNAVAILABLE ``ERASURE_STORE_UNAVAILABLE`` (call again) or
                FAILED_PRECONDITION ``ERASURE_STORE_REFUSED`` (fix the configuration first).
        """
        request = _admin_pb2.ForgetUserRequest(user_id=user_id)
        response = await self._unary(self._stub.ForgetUser, request, timeout)
        return [(s.store, s.deleted_count) for s in response.stores]

    async def export_user(
        self, user_id: str, *, timeout: float | None = None
    ) -> AsyncIterator[tuple[str, str]]:
        """Everything the service's stores keep about `user_id`, record by record as the
        server streams them: (store, the record as one line of JSON; docs/security.md,
        "Export format"). An unknown user yields nothing. `timeout` bounds the whole export.

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``, INVALID_ARGUMENT
                ``INVALID_USER_ID``, UNAVAILABLE ``EXPORT_STORE_UNAVAILABLE`` or
                FAILED_PRECONDITION ``EXPORT_STORE_REFUSED`` (what came before is not the
                whole export).
        """
        request = _admin_pb2.ExportUserRequest(user_id=user_id)
        call = self._stub.ExportUser(
            request, timeout=timeout or self.timeout, metadata=self._metadata
        )
        try:
            async for response in call:
                for record in response.records:
                    yield record.store, record.json
        except grpc.aio.AioRpcError as exc:
            raise AgentClientError.from_rpc_error(exc) from None
        finally:
            call.cancel()

    async def describe_rollouts(
        self, *, timeout: float | None = None
    ) -> list[_admin_pb2.RolloutStatus]:
        """The running chain's rollouts and what each candidate did (docs/rollout.md).

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``.
        """
        request = _admin_pb2.DescribeRolloutsRequest()
        response = await self._unary(self._stub.DescribeRollouts, request, timeout)
        return list(response.rollouts)

    async def promote_rollout(
        self, middleware_key: str = "", *, timeout: float | None = None
    ) -> _admin_pb2.RolloutStatus:
        """Give every new reply the candidate of the rollout of `middleware_key` (empty: the
        only one).

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``, NOT_FOUND
                ``ROLLOUT_NOT_FOUND`` or INVALID_ARGUMENT ``ROLLOUT_AMBIGUOUS``.
        """
        request = _admin_pb2.PromoteRolloutRequest(middleware_key=middleware_key)
        response = await self._unary(self._stub.PromoteRollout, request, timeout)
        return response.rollout

    async def rollback_rollout(
        self, middleware_key: str = "", *, timeout: float | None = None
    ) -> _admin_pb2.RolloutStatus:
        """Give every new reply the live middleware of the rollout of `middleware_key`.

        Raises:
            AgentClientError: as `promote_rollout`.
        """
        request = _admin_pb2.RollbackRolloutRequest(middleware_key=middleware_key)
        response = await self._unary(self._stub.RollbackRollout, request, timeout)
        return response.rollout

    async def describe_sidecars(
        self, *, timeout: float | None = None
    ) -> list[_admin_pb2.SidecarStatus]:
        """What the service knows of each sidecar of its running chain.

        Raises:
            AgentClientError: PERMISSION_DENIED ``ADMIN_ONLY``.
        """
        request = _admin_pb2.DescribeSidecarsRequest()
        response = await self._unary(self._stub.DescribeSidecars, request, timeout)
        return list(response.sidecars)
