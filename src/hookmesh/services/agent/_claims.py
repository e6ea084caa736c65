"""Which sessions are replying: claimed in this process, and leased across replicas."""

from __future__ import annotations

import asyncio
import logging

import grpc

from hookmesh.agent import Agent
from hookmesh.errors import RequestError
from hookmesh.services.agent._store import Lease, SessionLeases

log = logging.getLogger("hookmesh.agent_service")

Key = tuple[str, str]
"""(owner principal, session id)."""


def busy_error(session_id: str) -> RequestError:
    """FAILED_PRECONDITION ``SESSION_BUSY``: a reply of the session runs (here or elsewhere)."""
    return RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "SESSION_BUSY",
        f"session {session_id} is already replying; wait for it or call Interrupt",
        metadata={"sessionId": session_id},
    )


class SessionClaims:
    """One reply per session: an in-process claim first (no round trip when this replica
    already runs the session), then, when the store is shared, the store's lease.

    Args:
        leases: The store's leases; None when one process owns the store.
    """

    def __init__(self, leases: SessionLeases | None) -> None:
        self._leases = leases
        self._running: dict[Key, Agent | None] = {}
        self._held: dict[Key, Lease] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    async def claim(self, key: Key) -> None:
        """Claim `key` for one reply.

        Raises:
            RequestError: ``SESSION_BUSY`` when this or another replica runs it.
        """
        if key in self._running:
            raise busy_error(key[1])
        self._running[key] = None
        self._idle.clear()
        if self._leases is None:
            return
        try:
            lease = await self._leases.acquire(*key)
        except BaseException:
            self._drop(key)
            raise
        if lease is None:
            self._drop(key)
            raise busy_error(key[1])
        self._held[key] = lease

    def bind(self, key: Key, agent: Agent) -> None:
        """Record the agent running `key`'s reply (Interrupt and GetSession read it)."""
        self._running[key] = agent

    def agent(self, key: Key) -> Agent | None:
        """The agent running `key`'s reply in this process, if any."""
        return self._running.get(key)

    def lease(self, key: Key) -> Lease | None:
        """The lease of `key` (its writes carry it)."""
        return self._held.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._running

    async def release(self, key: Key) -> None:
        """End the claim; a lease that cannot be released frees itself on expiry."""
        lease = self._held.pop(key, None)
        try:
            if lease is not None and self._leases is not None:
                await asyncio.shield(self._leases.release(lease))
        except Exception as exc:
            log.warning("could not release the lease of a session: %s", exc)
        finally:
            self._drop(key)

    def _drop(self, key: Key) -> None:
        self._running.pop(key, None)
        if not self._running:
            self._idle.set()

    async def renew(self) -> None:
        """Extend the leases held; a reply whose lease was taken over is interrupted (its
        writes, still fenced by the lost lease, fail)."""
        if self._leases is None:
            return
        for lease in await self._leases.renew():
            key = (lease.owner, lease.session_id)
            # NOTE(sessions): the lost lease stays the reply's: its last writes carry the
            # stale token and are refused (SESSION_TAKEN_OVER) instead of going unfenced.
            log.warning("session %s was taken over by another replica", lease.session_id)
            agent = self._running.get(key)
            if agent is not None:
                agent.interrupt()

    async def interrupt(self, key: Key) -> bool:
        """Stop `key`'s running reply, here or (through the shared store) on the replica
        that runs it; whether one was told to stop."""
        agent = self._running.get(key)
        if agent is not None:
            return agent.interrupt()
        if key in self._running or self._leases is None:
            return False
        return await self._leases.signal_interrupt(*key)

    async def relay_interrupts(self) -> None:
        """Interrupt the replies other replicas ask to stop, until cancelled; a broken
        connection is opened again after a second (interrupts asked meanwhile are lost, and
        the caller can cancel its Reply call instead)."""
        assert self._leases is not None
        while True:
            try:
                async for key in self._leases.interrupt_requests():
                    agent = self._running.get(key)
                    if agent is not None:
                        agent.interrupt()
            except Exception as exc:
                log.warning("the interrupt relay's connection broke: %s", exc)
            await asyncio.sleep(1.0)

    def busy(self) -> set[Key]:
        """The sessions replying in this process (retention never removes them)."""
        return set(self._running)

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout` s) until every reply has ended and been persisted."""
        async with asyncio.timeout(timeout):
            await self._idle.wait()
