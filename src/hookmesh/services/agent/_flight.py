"""One reply in flight in this process: it drives the agent in a task of its own, numbers and
keeps the events, hands them to every watcher, and saves the session with the reply's journal
at the points its durability names. A watcher that goes away never stops it (unless the
durability is ``exit``); Interrupt does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from hookmesh.agent import Agent, AgentState, ReplyHandedOver, StepPoint
from hookmesh.schema import AgentEvent, event_to_proto
from hookmesh.services.agent._store import JournalStep, Lease, LeaseLostError, SessionStore
from hookmesh.v1 import event_pb2 as _event_pb2

log = logging.getLogger("hookmesh.agent_service")

Durability = Literal["step", "event", "exit"]
"""When a reply's progress is saved (the proto's `Durability`)."""
Key = tuple[str, str]
"""(owner principal, session id)."""
Outcome = Literal["ended", "handed_over", "taken_over", "failed"]
"""How a flight ended: its reply ended (or paused) and was saved; it was left to another
replica at its last saved step; another replica took its session over (its last turn was not
saved); or the final save failed."""

_PAUSES = frozenset({"awaiting_confirmation", "awaiting_external_execution"})


class Flight:
    """A reply running here. Build it, then `start` it with the agent's event stream.

    Args:
        key: The session.
        reply_id: The reply.
        agent: The agent replying (its state is what is saved).
        store: The session store.
        lease: The session's lease now (None without leases); asked at each save.
        durability: When to save.
        request: The reply's request without its messages, as saved in the journal.
        after_seq: The last sequence number of the reply before this flight (a resumed or
            continued reply numbers on from it).
    """

    def __init__(
        self,
        key: Key,
        reply_id: str,
        agent: Agent,
        store: SessionStore,
        lease: Callable[[], Lease | None],
        durability: Durability,
        request: bytes,
        after_seq: int = 0,
    ) -> None:
        self.key = key
        self.reply_id = reply_id
        self.agent = agent
        self.durability: Durability = durability
        self._store = store
        self._lease = lease
        self._request = request
        self.seq = after_seq
        """The sequence number of the last event."""
        self._step_seq = after_seq
        self._saved_seq = after_seq
        self._history: list[tuple[int, _event_pb2.AgentEvent]] = []
        self._unsaved: list[tuple[int, _event_pb2.AgentEvent]] = []
        self._watchers: list[asyncio.Queue[tuple[int, _event_pb2.AgentEvent] | None]] = []
        self.outcome: Outcome | None = None
        self.error: Exception | None = None
        """Why the last save failed (outcome ``failed``)."""
        self.handing_over = False
        """Set by a draining replica: the flight stops at its next saved step."""
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def checkpoint(self) -> Callable[[StepPoint], Any] | None:
        """The agent's checkpoint callback for this flight's durability (none for exit)."""
        return None if self.durability == "exit" else self._at_step

    def start(self, events: AsyncIterator[AgentEvent], finished: Callable[[Flight], Any]) -> None:
        """Drive `events` in a task of its own; `finished` is awaited once it is over."""
        name = f"reply {self.reply_id}"
        self.task = asyncio.create_task(self._fly(events, finished), name=name)

    async def _fly(
        self, events: AsyncIterator[AgentEvent], finished: Callable[[Flight], Any]
    ) -> None:
        try:
            async for event in events:
                self._emit(event)
                if self.durability == "event":
                    await self._save_on("running", self.agent.checkpoint_state(), step=False)
            await self._finish()
        except ReplyHandedOver:
            self.outcome = self.outcome or "handed_over"
        except asyncio.CancelledError:
            self.outcome = self.outcome or "handed_over"
        except LeaseLostError:
            log.warning("session %s was taken over: its last turn is not saved", self.key[1])
            self.outcome = "taken_over"
        except Exception as exc:
            log.warning("reply %s could not be saved: %s", self.reply_id, exc)
            self.outcome, self.error = "failed", exc
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except BaseException as exc:  # the agent's own close never fails the flight
                    log.debug("closing reply %s: %s", self.reply_id, exc)
            # NOTE(durability): the session is released before a watcher learns the reply
            # ended, so a caller's next call finds it free.
            try:
                await finished(self)
            finally:
                for queue in self._watchers:
                    queue.put_nowait(None)
                self.done.set()

    async def _finish(self) -> None:
        reason = self.agent.last_finish_reason
        status = "paused" if reason in _PAUSES else "ended"
        await asyncio.shield(self._save(status, self.agent.state, step=True))
        self.outcome = "ended"

    def _emit(self, event: AgentEvent) -> None:
        self.seq += 1
        item = (self.seq, event_to_proto(event))
        self._history.append(item)
        self._unsaved.append(item)
        for queue in self._watchers:
            queue.put_nowait(item)

    async def _at_step(self, unused_point: StepPoint) -> None:
        await self._save_on("running", self.agent.checkpoint_state(), step=True)
        if self.handing_over:
            raise ReplyHandedOver

    async def _save_on(self, status: str, state: AgentState, *, step: bool) -> None:
        """Save a point of the running reply. The reply goes on when the store fails (what is
        not saved goes with the next save; a replica that dies meanwhile loses the steps
        since the last one that was); it stops when another replica took its session."""
        try:
            await self._save(status, state, step=step)
        except LeaseLostError:
            log.warning("session %s was taken over: this reply stops", self.key[1])
            self.outcome = "taken_over"
            raise ReplyHandedOver from None
        except Exception as exc:
            log.warning("reply %s: a step could not be saved (it goes on): %s", self.reply_id, exc)

    async def _save(self, status: str, state: AgentState, *, step: bool) -> None:
        """Save the session's state with the reply's new events; `step`: the state is a step
        boundary's (a continuation numbers on from here)."""
        events = [(seq, pb.SerializeToString()) for seq, pb in self._unsaved]
        step_seq = self.seq if step else self._step_seq
        journal = JournalStep(
            self.reply_id, status, self.seq, step_seq, self.durability, self._request, events
        )
        await self._store.put(*self.key, self.agent.name, state, lease=self._lease(), step=journal)
        self._unsaved.clear()
        self._saved_seq, self._step_seq = self.seq, step_seq

    async def watch(self, after_seq: int) -> AsyncIterator[tuple[int, _event_pb2.AgentEvent]]:
        """The events after `after_seq`: those already emitted, then the new ones, until the
        flight is over (then `outcome` says how it ended)."""
        queue: asyncio.Queue[tuple[int, _event_pb2.AgentEvent] | None] = asyncio.Queue()
        # NOTE(durability): registered before the history is read, so what comes while it
        # is sent waits in the queue; a flight already over sends no end marker.
        self._watchers.append(queue)
        over = self.done.is_set()
        try:
            last = after_seq
            for seq, pb in list(self._history):
                if seq > last:
                    last = seq
                    yield seq, pb
            if over:
                return
            while (item := await queue.get()) is not None:
                if item[0] > last:
                    last = item[0]
                    yield item
        finally:
            self._watchers.remove(queue)

    @property
    def watched(self) -> bool:
        """Whether someone follows the flight now."""
        return bool(self._watchers)
