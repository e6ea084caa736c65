"""The replies of one agent service: the flights running here, re-attaching a watcher to a
reply wherever it runs, continuing replies cut off elsewhere, and handing ours over on a
drain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import grpc

from hookmesh.agent import Agent, AgentState
from hookmesh.errors import RequestError
from hookmesh.services.agent._chain import MiddlewareChain
from hookmesh.services.agent._claims import Key, SessionClaims
from hookmesh.services.agent._config import DurabilityConfig
from hookmesh.services.agent._flight import Durability, Flight
from hookmesh.services.agent._store import ReplyRecord, SessionStore
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import event_pb2 as _event_pb2

log = logging.getLogger("hookmesh.agent_service")

_FOLLOW_SECONDS = 0.25
"""How often a watcher of a reply running on another replica reads its journal again."""

Build = Callable[[Key, AgentState, _agent_pb2.ReplyRequest, MiddlewareChain], Agent]
"""Makes the agent for a session's state, the reply's saved request and a chain."""
Item = tuple[int, _event_pb2.AgentEvent]
"""A reply's event with its sequence number."""


def handed_over(session_id: str) -> RequestError:
    """UNAVAILABLE ``REPLY_HANDED_OVER``: this replica left the reply to another; re-attach."""
    return RequestError(
        grpc.StatusCode.UNAVAILABLE,
        "REPLY_HANDED_OVER",
        f"this replica is stopping: the reply of session {session_id} goes on on another; "
        "call WatchReply to follow it",
        metadata={"sessionId": session_id},
    )


def _taken_over(session_id: str, durability: str) -> RequestError:
    """How a reply taken over by another replica ends here: a durable one goes on there
    (UNAVAILABLE ``REPLY_HANDED_OVER``: re-attach), an ``exit`` one is lost (ABORTED
    ``SESSION_TAKEN_OVER``)."""
    if durability != "exit":
        return RequestError(
            grpc.StatusCode.UNAVAILABLE,
            "REPLY_HANDED_OVER",
            f"session {session_id} was taken over by another replica while this reply ran "
            "past its lease; the reply goes on there: call WatchReply to follow it",
            metadata={"sessionId": session_id},
        )
    return RequestError(
        grpc.StatusCode.ABORTED,
        "SESSION_TAKEN_OVER",
        f"session {session_id} was taken over by another replica while this reply ran past "
        "its lease; this reply's turn was not saved",
        metadata={"sessionId": session_id},
    )


def reply_not_found(session_id: str, reply_id: str) -> RequestError:
    """NOT_FOUND ``REPLY_NOT_FOUND``."""
    which = f"reply {reply_id}" if reply_id else "reply"
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "REPLY_NOT_FOUND",
        f"session {session_id} has no {which} to watch",
        metadata={"sessionId": session_id, "replyId": reply_id},
    )


class ReplyDesk:
    """Where this process keeps its replies.

    Args:
        store: The session store (its journal).
        claims: The sessions claimed here (and their leases).
        settings: Durability settings.
        chain: The middleware chain new replies take now.
        build: Makes an agent for a reply continued here.
    """

    def __init__(
        self,
        store: SessionStore,
        claims: SessionClaims,
        settings: DurabilityConfig,
        chain: Callable[[], MiddlewareChain],
        build: Build,
    ) -> None:
        self.store = store
        self.claims = claims
        self.settings = settings
        self._chain = chain
        self._build = build
        self.flights: dict[Key, Flight] = {}
        self.draining = False

    async def claim(self, key: Key) -> MiddlewareChain:
        """Claim the session and take the current chain for a reply of it.

        Raises:
            RequestError: ``SESSION_BUSY`` when this or another replica runs it.
        """
        await self.claims.claim(key)
        chain = self._chain()
        chain.acquire()
        return chain

    async def release(self, key: Key, chain: MiddlewareChain) -> None:
        """End a reply's hold: its chain first (closed if retired), then the claim."""
        try:
            await chain.release()
        finally:
            await self.claims.release(key)

    def launch(
        self,
        key: Key,
        chain: MiddlewareChain,
        agent: Agent,
        reply_id: str,
        events: Callable[[Flight], object],
        *,
        durability: Durability,
        request: bytes,
        after_seq: int = 0,
    ) -> Flight:
        """Start a claimed session's reply in flight; the claim and chain are released when
        it lands. `events` makes the agent's stream, given the flight (for its checkpoint)."""
        flight = Flight(
            key,
            reply_id,
            agent,
            self.store,
            lambda: self.claims.lease(key),
            durability,
            request,
            after_seq,
        )
        if self.draining and durability != "exit":
            flight.handing_over = True
        self.claims.bind(key, agent)
        self.flights[key] = flight

        async def landed(done: Flight) -> None:
            if self.flights.get(key) is done:
                del self.flights[key]
            if chain.rollouts:
                failed = done.outcome == "failed" or done.agent.last_finish_reason == "error"
                chain.landed(key[1], failed)
            await self.release(key, chain)

        flight.start(events(flight), landed)  # type: ignore[arg-type]
        return flight

    def flight(self, key: Key, reply_id: str = "") -> Flight | None:
        """The session's reply in flight here (that reply, when named)."""
        flight = self.flights.get(key)
        if flight is None or (reply_id and flight.reply_id != reply_id):
            return None
        return flight

    # --- watching ------------------------------------------------------------------------

    async def watch(self, key: Key, reply_id: str, after_seq: int) -> AsyncIterator[Item]:
        """A reply's events after `after_seq` until it ends, wherever it runs: from its flight
        here; else its saved events, following the journal while another replica runs it and
        continuing it here when it was cut off.

        Raises:
            RequestError: ``REPLY_NOT_FOUND``; ``REPLY_HANDED_OVER`` (re-attach) or
                ``SESSION_TAKEN_OVER`` when the flight followed here ended so.
        """
        last = after_seq
        while True:
            flight = self.flight(key, reply_id)
            if flight is not None:
                async for item in self.follow(flight, last):
                    yield item
                return
            record = await self.store.reply(*key, reply_id)
            if record is None:
                raise reply_not_found(key[1], reply_id)
            reply_id = record.reply_id
            for seq, data in await self.store.events(*key, reply_id, last):
                last = seq
                yield seq, _event_pb2.AgentEvent.FromString(data)
            if record.status != "running":
                if last >= record.last_seq:
                    return
                continue
            if self.draining:
                raise handed_over(key[1])  # this replica stops: follow it elsewhere
            if key not in self.claims and await self.adopt(record) is not None:
                continue
            await asyncio.sleep(_FOLLOW_SECONDS)

    async def follow(self, flight: Flight, after_seq: int) -> AsyncIterator[Item]:
        """A flight's events after `after_seq`, then how it ended as an error if it did not
        end its reply."""
        async for item in flight.watch(after_seq):
            yield item
        if flight.outcome == "handed_over":
            raise handed_over(flight.key[1])
        if flight.outcome == "taken_over":
            raise _taken_over(flight.key[1], flight.durability)
        if flight.error is not None:
            raise flight.error

    # --- continuing replies cut off ------------------------------------------------------

    async def adopt(self, record: ReplyRecord) -> Flight | None:
        """Continue a reply cut off while running, here: None when another replica holds its
        session (or the session no longer holds that reply running)."""
        key = (record.owner, record.session_id)
        if self.draining:
            return None
        try:
            chain = await self.claim(key)
        except RequestError:
            return None
        try:
            stored = await self.store.get(*key)
            pending = stored.state.pending if stored is not None else None
            if (
                stored is None
                or pending is None
                or pending.awaiting != "running"
                or pending.reply_id != record.reply_id
            ):
                await self.release(key, chain)
                return None
            request = _agent_pb2.ReplyRequest.FromString(record.request)
            agent = self._build(key, stored.state, request, chain)
        except BaseException:
            await self.release(key, chain)
            raise
        log.info("continuing reply %s of session %s here", record.reply_id, key[1])
        return self.launch(
            key,
            chain,
            agent,
            record.reply_id,
            lambda flight: agent.redrive(checkpoint=flight.checkpoint()),
            durability=record.durability,  # type: ignore[arg-type]
            request=record.request,
            after_seq=record.step_seq,
        )

    async def adopt_orphans(self) -> int:
        """Continue every reply cut off and not held by a live replica; how many."""
        adopted = 0
        for record in await self.store.orphans():
            if (record.owner, record.session_id) in self.claims:
                continue
            if await self.adopt(record) is not None:
                adopted += 1
        return adopted

    async def take_over(self) -> None:
        """Look for replies cut off elsewhere every `takeover_seconds`, until cancelled (a
        failure is logged: the next round tries again)."""
        while True:
            await asyncio.sleep(self.settings.takeover_seconds)
            try:
                await self.adopt_orphans()
            except Exception as exc:
                log.warning("looking for replies cut off failed: %s", exc)

    # --- draining ------------------------------------------------------------------------

    def hand_over(self) -> None:
        """Stop taking replies over and leave every durable flight to another replica at its
        next saved step."""
        self.draining = True
        for flight in self.flights.values():
            if flight.durability != "exit":
                flight.handing_over = True

    async def drain(self, timeout: float) -> None:
        """Wait up to `timeout` s for the flights to land; then stop those still flying: a
        durable one is left at its last saved step (another replica continues it), an
        ``exit`` one is interrupted and saved as interrupted. (A replica that stops calls
        `hand_over` first, so its durable flights land at their next saved step.)

        Raises:
            TimeoutError: A flight did not land even then.
        """
        flights = list(self.flights.values())
        landed = [asyncio.ensure_future(f.done.wait()) for f in flights]
        try:
            if landed:
                await asyncio.wait(landed, timeout=timeout)
            late = [f for f in flights if not f.done.is_set()]
            for flight in late:
                if flight.durability == "exit":
                    flight.agent.interrupt()
                elif flight.task is not None:
                    flight.task.cancel()
            if late:
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(f.done.wait() for f in late))
        finally:
            for waiter in landed:
                waiter.cancel()
