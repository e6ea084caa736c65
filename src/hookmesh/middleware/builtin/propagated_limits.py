"""Limits set on the top reply that bound every sub-agent below it, local (handoffs) or remote
(A2A, through the limits extension): tool calls reserved from the parent's remainder and
given back when unused, tokens and cost charged to every level, one absolute deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hookmesh.a2a import Limits, Spent, limits_json, spent_json
from hookmesh.errors import HookmeshError
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    ModelCallArgs,
    ModelCallNext,
    PermissionArgs,
    PermissionNext,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.middleware._base import Middleware, PermissionDecision
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.models import ModelChunk, ModelResponse, ModelResult
from hookmesh.schema import AgentEvent, CustomEvent

SPENT_EVENT = "hookmesh.limits.spent"
"""Custom event a reply under request limits emits just before its reply_end: ``{toolCalls,
tokens, costUsd}`` it and everything below it spent (the A2A server reports it)."""
_N = TypeVar("_N", int, float)
DELEGATION_GRACE = 5.0
"""Seconds past the deadline a caller waits for a remote agent it sent the deadline to, so
the callee's own report of it (with its reason) arrives before the caller gives up."""


class LimitSpentError(HookmeshError):
    """A model call was due after the top reply's token or cost limit was spent."""

    reason = "LIMIT_SPENT"


class DeadlineExceededError(HookmeshError):
    """The top reply's deadline passed while this reply still ran."""

    reason = "DEADLINE_EXCEEDED"


@dataclass(slots=True, eq=False)
class Pool:
    """What one reply may still spend; a child's pool hangs under its parent's.

    Tool calls are reserved: a child's `left` was taken out of its parent's and what it
    does not use goes back. Tokens and cost are charged to the pool and every ancestor
    (each level with a limit of its own has a counter), so the tightest level decides.
    """

    left: int | None
    """Tool calls still allowed; None: no tool-call limit."""
    reserved: int | None
    """Tool calls this pool started with."""
    tokens: int | None = None
    """Tokens left at this level; None: only the ancestors' limits apply."""
    cost: float | None = None
    """US dollars left at this level; None: only the ancestors' limits apply."""
    deadline: float | None = None
    """When it must be over (Unix time), the tightest of its own and its parent's."""
    parent: Pool | None = None
    prices: tuple[float, float] = (0.0, 0.0)
    """US dollars per million input and output tokens."""
    used_calls: int = 0
    used_tokens: int = 0
    used_cost: float = 0.0
    delegated: set[str] = field(default_factory=set)
    """Tool calls running a remote agent that was sent the deadline."""
    timers: dict[str, asyncio.Timeout] = field(default_factory=dict)
    at: float | None = None
    """The deadline on the event loop's clock, converted once (see `due`)."""

    def _chain(self) -> list[Pool]:
        out: list[Pool] = []
        pool: Pool | None = self
        while pool is not None:
            out.append(pool)
            pool = pool.parent
        return out

    def take(self) -> bool:
        """Spend one tool call if any is left. No await between test and change: atomic in
        the event loop, so concurrent tool checks cannot both take the last call."""
        if self.left is not None:
            if self.left <= 0:
                return False
            self.left -= 1
        self.used_calls += 1
        return True

    def tokens_left(self) -> int | None:
        """Tokens left, the tightest level's; None: no token limit."""
        found = [p.tokens for p in self._chain() if p.tokens is not None]
        return min(found) if found else None

    def cost_left(self) -> float | None:
        """US dollars left, the tightest level's; None: no cost limit."""
        found = [p.cost for p in self._chain() if p.cost is not None]
        return min(found) if found else None

    def charge(self, tokens: int, cost: float) -> None:
        """Count tokens and cost spent below or at this level, on every level up."""
        for pool in self._chain():
            pool.used_tokens += tokens
            pool.used_cost += cost
            if pool.tokens is not None:
                pool.tokens -= tokens
            if pool.cost is not None:
                pool.cost -= cost

    def charge_usage(self, input_tokens: int, output_tokens: int) -> None:
        """Charge one model call's usage at this level's prices."""
        per_input, per_output = self.prices
        cost = (input_tokens * per_input + output_tokens * per_output) / 1_000_000
        self.charge(input_tokens + output_tokens, cost)

    def reserve(self, cap: int | None) -> Pool:
        """A child pool of `cap` tool calls (all that is left when None, or when less is
        left), taken out of this one at once; tokens, cost and deadline are this one's."""
        return self.nest(Limits(tool_calls=cap))

    def nest(self, limits: Limits) -> Pool:
        """A child pool with limits of its own, within this one's: its tool calls are taken
        out of this one at once (at most what is left)."""
        calls = limits.tool_calls
        if self.left is not None:
            calls = self.left if calls is None else min(calls, self.left)
            self.left -= calls
        deadlines = [d for d in (self.deadline, limits.deadline) if d is not None]
        return Pool(
            calls,
            calls,
            tokens=limits.tokens,
            cost=limits.cost_usd,
            deadline=min(deadlines) if deadlines else None,
            parent=self,
            prices=self.prices,
        )

    def release(self) -> None:
        """Give the unused tool calls back to the parent, and count the used ones there."""
        if self.parent is not None:
            if self.left is not None and self.parent.left is not None:
                self.parent.left += self.left
            self.parent.used_calls += self.used_calls
        if self.left is not None:
            self.left = 0
        self.used_calls = 0

    def settle(self, spent: Spent | None) -> None:
        """Close a remote child's pool with what the remote agent reported it spent; with no
        report (a third-party agent, a transport error) one tool call counts as used, the
        call to it: counting the whole reservation would let one such call spend the rest
        of the reply's calls (tokens and cost are unknown)."""
        if spent is None:
            used = 1 if self.reserved is None else min(1, self.reserved)
        else:
            used = (
                spent.tool_calls if self.reserved is None else min(spent.tool_calls, self.reserved)
            )
            self.charge(spent.tokens, spent.cost_usd)
        if self.left is not None and self.reserved is not None:
            self.left = self.reserved - used
        self.used_calls = used
        self.release()

    def remaining(self) -> Limits:
        """What this pool may still spend, as the extension sends it."""
        return Limits(self.left, self.tokens_left(), self.cost_left(), self.deadline)

    def spent(self) -> Spent:
        """What this reply and its finished children spent."""
        return Spent(self.used_calls, self.used_tokens, self.used_cost)

    def due(self) -> float:
        """The deadline on the running event loop's clock. Converted at the first check of
        the reply's run and kept: the deadline does not move once the run has begun, so the
        per-event checks of model streams and tool runs read no clocks."""
        if self.at is None:
            assert self.deadline is not None
            self.at = _loop_time(self.deadline)
        return self.at

    def delegate(self, call_id: str) -> None:
        """Mark a tool call as running a remote agent that honours the deadline: its run is
        cut `DELEGATION_GRACE` seconds after the deadline, not at it."""
        self.delegated.add(call_id)
        timer = self.timers.get(call_id)
        if timer is not None and self.deadline is not None:
            timer.reschedule(self.due() + DELEGATION_GRACE)


@dataclass(slots=True)
class _Open:
    pool: Pool
    per_child: int | None
    top: int | None
    owner: PropagatedLimitMiddleware
    configured: int = 0
    """How many configured limits (not a caller's) of the same reply are open at this one,
    itself included: the next configured limit inside is that deep among them."""
    unfinished: set[str] = field(default_factory=set)
    """The reply's tool calls that took a call and have no result yet (shared by every
    limit of the reply): a continuation after a cut runs them again, and takes again."""


_OPEN: dict[str, _Open] = {}
"""The innermost pool of every running reply under a propagated limit, by reply id (in
process)."""


def _loop_time(unix: float) -> float:
    return asyncio.get_running_loop().time() + (unix - time.time())


def _when(unix: float) -> str:
    return str(limits_json(Limits(deadline=unix))["deadline"])


class PropagatedLimitMiddleware(Middleware):
    """Limits a reply and every sub-agent below it together: tool calls, tokens, cost and a
    deadline. Sub-agents are local ones (handoff receivers, supervisor workers, plan-execute's
    planner and workers, skill forks) and remote A2A agents
    (`hookmesh.middleware.builtin.remote_agent`, which sends what is left in the limits
    extension and charges what the remote agent reports it spent).

    - Tool calls: each call the reply allows takes one from its pool before it runs
      (``on_check_permission``, after the other checks); with the pool empty the call is
      denied with a reason naming the limit and the model goes on. A sub-agent reserves
      `per_child` calls (or all that is left when None) out of its parent's pool when it
      starts, and gives back what it did not use when it ends.
    - Tokens (input plus output, as the models report them) and cost (at
      `input_usd_per_mtok` / `output_usd_per_mtok`) are charged to the reply and every level
      above; before each model call, if any level has none left, the reply ends with
      reason ``LIMIT_SPENT``. A call that starts under the limit completes.
    - Deadline: `deadline_seconds` after the reply starts (the tightest of every level's).
      A model call or tool run going on then is cut and the reply ends with reason
      ``DEADLINE_EXCEEDED``; a remote agent sent the deadline gets `DELEGATION_GRACE` more
      seconds to report it ended.

    Reservations are taken in one step of the event loop, with nothing awaited between
    reading the remainder and taking from it, so parallel children never exceed it. A
    second limit on the same reply (say one a caller sent and one configured) nests inside
    the first. A reply that pauses and resumes goes on with what it had left (kept in its
    middleware state, so also on another replica; every limit of the reply keeps its own
    remainder). So does a reply continued after a cut (`Agent.redrive`: its replica died):
    the checkpoint holds its remainder as of its last model call or tool result, the calls
    then without a result not counted (they run again), and the time it was cut off counts
    toward its deadline. Not supported: a sidecar (pools are in the agent's process).

    Example:
        >>> agent = Agent(model, middlewares=[PropagatedLimitMiddleware(20), handoffs])

    Args:
        tool_calls: Tool calls the reply and its sub-agents may make together (>= 0); None:
            no tool-call limit.
        tokens: Tokens they may use together (>= 0); None: no token limit.
        cost_usd: US dollars they may spend together (>= 0); None: no cost limit.
        deadline_seconds: Seconds the reply and its sub-agents have from its start (> 0).
        per_child: Most tool calls one sub-agent reserves; None: all that is left.
        input_usd_per_mtok: Price of a million input tokens of this agent's models.
        output_usd_per_mtok: Price of a million output tokens.
        report: Emit `SPENT_EVENT` before the reply's end (the A2A server reports it).
    """

    def __init__(
        self,
        tool_calls: int | None = None,
        *,
        tokens: int | None = None,
        cost_usd: float | None = None,
        deadline_seconds: float | None = None,
        per_child: int | None = None,
        input_usd_per_mtok: float = 0.0,
        output_usd_per_mtok: float = 0.0,
        report: bool = False,
    ) -> None:
        self.tool_calls = (
            None if tool_calls is None else check.whole("tool_calls", tool_calls, minimum=0)
        )
        self.tokens = check.optional_whole("tokens", tokens, minimum=0)
        self.cost_usd = None if cost_usd is None else _not_negative("cost_usd", cost_usd)
        self.deadline_seconds = (
            None
            if deadline_seconds is None
            else check.positive("deadline_seconds", deadline_seconds)
        )
        self.per_child = check.optional_whole("per_child", per_child)
        self.prices = (
            _not_negative("input_usd_per_mtok", input_usd_per_mtok),
            _not_negative("output_usd_per_mtok", output_usd_per_mtok),
        )
        self.report = report

    def middleware_key(self) -> str:
        return "propagated_limits"

    def _limits(self) -> Limits:
        deadline = None if self.deadline_seconds is None else time.time() + self.deadline_seconds
        return Limits(self.tool_calls, self.tokens, self.cost_usd, deadline)

    def _open(self, outer: _Open | None) -> Pool:
        limits = self._limits()
        if outer is not None:
            pool = outer.pool.nest(limits)
            pool.prices = self.prices
            return pool
        calls = limits.tool_calls
        return Pool(
            calls, calls, limits.tokens, limits.cost_usd, limits.deadline, prices=self.prices
        )

    def _top(self, outer: _Open | None, pool: Pool) -> int | None:
        return outer.top if outer is not None else pool.reserved

    def _slot(self, outer: _Open | None) -> tuple[str, int]:
        """Where this limit keeps its remainder over a pause, and how many configured limits
        are open with it. Only configured limits count toward the depth: a caller's come
        and go between a reply's steps (sent with a resume, or lost with its record), and
        each configured limit must find its own remainder whatever surrounds it."""
        depth = outer.configured if outer is not None else 0
        return _slot(depth), depth + 1

    def _go_on(self, pool: Pool, left: dict[str, Any], outer: _Open | None) -> None:
        if outer is None:
            self._resume(pool, left)
        else:
            self._resume_nested(pool, left)

    def _continue(self, pool: Pool, left: dict[str, Any], outer: _Open | None) -> None:
        """Go on from what this reply had left at its last checkpoint before it was cut off
        (a replica died; `Agent.redrive`): as after a pause."""
        self._go_on(pool, left, outer)

    def _resume(self, pool: Pool, left: dict[str, Any]) -> None:
        """Go on from what this reply had left at its pause, and count what it had spent
        (nobody above it counted that)."""
        _restore(pool, left)
        pool.used_calls, pool.used_tokens, pool.used_cost = left["used"]

    def _resume_nested(self, pool: Pool, left: dict[str, Any]) -> None:
        """A limit inside another on the same reply goes on from what it had left at the
        pause (within what the enclosing one has left now): the tool calls it no longer has
        go back to the enclosing pool at once. What it spent is in the enclosing one's
        totals already."""
        before = pool.left
        _restore(pool, left)
        if pool.parent is not None and pool.parent.left is not None and before is not None:
            pool.parent.left += before - (pool.left or 0)

    def _mine(self, agent: AgentView) -> Pool | None:
        found = _OPEN.get(agent.reply_id)
        return found.pool if found is not None and found.owner is self else None

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Open this reply's pool for its run, charge its own model calls, report what it
        spent when asked; give back what is left when it ends."""
        rid = agent.reply_id
        outer = _OPEN.get(rid)
        pool = self._open(outer)
        kept = self.state(agent)
        slot, configured = self._slot(outer)
        saved = kept.get(slot)
        running = f"{slot}{RUNNING}"
        if saved is not None:
            self._go_on(pool, saved, outer)
        elif (cut := kept.get(running)) is not None:
            self._continue(pool, _cut_left(cut), outer)
        top = self._top(outer, pool)
        opened = _Open(pool, self.per_child, top, self, configured)
        if outer is not None:
            opened.unfinished = outer.unfinished
        _OPEN[rid] = opened
        try:
            async for event in next_handler():
                if not event.source_path:
                    if event.type == "model_call_end":
                        # Only the innermost limit of the reply charges: its charge goes up
                        # through every enclosing pool already.
                        if event.usage is not None and _OPEN[rid].pool is pool:
                            pool.charge_usage(event.usage.input_tokens, event.usage.output_tokens)
                        kept[running] = _running(pool, _OPEN[rid])
                    elif event.type == "tool_result_end":
                        opened.unfinished.discard(event.call_id)
                        kept[running] = _running(pool, _OPEN[rid])
                    elif event.type == "reply_end":
                        kept.pop(running, None)
                        if event.finish_reason.startswith("awaiting"):
                            kept[slot] = _kept(pool)
                        else:
                            kept.pop(slot, None)
                        if self.report:
                            yield CustomEvent(
                                reply_id=rid, name=SPENT_EVENT, value=spent_json(pool.spent())
                            )
                        pool.release()  # before an enclosing limit of this reply reports
                yield event
        finally:
            if outer is not None:
                _OPEN[rid] = outer
            else:
                _OPEN.pop(rid, None)
            pool.release()

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        decision = await next_handler()
        pool = self._mine(agent)
        if decision.behavior == "deny" or pool is None:
            return decision
        if pool.take():
            _OPEN[agent.reply_id].unfinished.add(kwargs["tool_call"].id)
            return decision
        top = _OPEN[agent.reply_id].top
        return PermissionDecision(
            "deny",
            f"the tool-call limit of the top reply is spent ({top} calls in all; "
            f"this agent had {pool.reserved})",
        )

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Refuse a model call once tokens, cost or time are spent; cut one at the deadline."""
        pool = self._mine(agent)
        if pool is None:
            return await next_handler()
        _check_left(agent, pool)
        if pool.deadline is None:
            return await next_handler()
        deadline, due = pool.deadline, pool.due()
        try:
            async with asyncio.timeout_at(due):
                result = await next_handler()
        except TimeoutError:
            raise _late(agent, deadline) from None
        if isinstance(result, ModelResponse):
            return result
        return _cut_stream(agent, result, deadline, due)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Cut a tool run at the deadline (a delegated one `DELEGATION_GRACE` s later)."""
        pool = self._mine(agent)
        if pool is None or pool.deadline is None:
            return next_handler()
        return _cut_run(agent, pool, kwargs["tool_call"].id, next_handler())


CALLER_SLOT = "caller"
"""Where a caller's limits keep their remainder over a pause."""


def _slot(depth: int) -> str:
    """Where the configured limit with `depth` configured limits of the same reply around
    it keeps its remainder (``kept[slot]``): ``left`` for the outermost, ``nested.<depth>``
    inside others."""
    return "left" if depth == 0 else f"nested.{depth}"


def _kept(pool: Pool) -> dict[str, Any]:
    """What a reply's pool has left as it pauses (its children have given back what they
    did not use), so the same reply resumed goes on from there."""
    seconds = None if pool.deadline is None else max(0.0, pool.deadline - time.time())
    return {
        "tool_calls": pool.left,
        "tokens": pool.tokens,
        "cost_usd": pool.cost,
        "seconds": seconds,
        "used": [pool.used_calls, pool.used_tokens, pool.used_cost],
    }


RUNNING = ".running"
"""Suffix of the slot where a running reply keeps its remainder as of its last model call
or tool result, so the checkpoint saved at the next step boundary holds it: a reply
continued after a cut goes on from there instead of from its full limits."""


def _running(pool: Pool, innermost: _Open) -> dict[str, Any]:
    """What a running reply's `pool` would keep if the reply paused now, for a continuation
    after a cut: the limits of the same reply inside it given back (as they are when it
    pauses), and the calls without a result not counted (the continuation runs them again).
    The deadline is an instant: the time the reply was cut off counts, unlike a pause's."""
    kept = _kept(pool)
    left, used = pool.left, pool.used_calls
    inner: Pool | None = innermost.pool
    while inner is not None and inner is not pool:
        if left is not None and inner.left is not None:
            left += inner.left
        used += inner.used_calls
        inner = inner.parent
    unfinished = len(innermost.unfinished)
    kept["tool_calls"] = None if left is None else left + unfinished
    kept["used"][0] = used - unfinished
    return {**kept, "seconds": None, "deadline": pool.deadline}


def _cut_left(cut: dict[str, Any]) -> dict[str, Any]:
    """A running snapshot as a pause's remainder: the seconds left until its deadline."""
    deadline = cut.get("deadline")
    seconds = None if deadline is None else max(0.0, deadline - time.time())
    return {**cut, "seconds": seconds}


def _restore(pool: Pool, left: dict[str, Any]) -> None:
    """A resumed reply's pool: what it had left when it paused, not its full limits, and
    never more than its limits now allow (they may have been lowered meanwhile). The
    deadline is the sooner of its own (a caller's is absolute) and the seconds it had left
    (time waiting for the user does not count)."""
    pool.left = _least(pool.left, left["tool_calls"])
    pool.tokens = _least(pool.tokens, left["tokens"])
    pool.cost = _least(pool.cost, left["cost_usd"])
    _restore_deadline(pool, left)


def _restore_deadline(pool: Pool, left: dict[str, Any]) -> None:
    if pool.deadline is not None and left["seconds"] is not None:
        pool.deadline = min(pool.deadline, time.time() + left["seconds"])


def _least(now: _N | None, saved: _N | None) -> _N | None:
    """The limit on resume: none when there is none now, else the smaller of now and then."""
    if now is None:
        return None
    return now if saved is None else min(now, saved)


def _not_negative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, not {value!r}")
    return float(value)


def _check_left(agent: AgentView, pool: Pool) -> None:
    if pool.deadline is not None and time.time() >= pool.deadline:
        raise _late(agent, pool.deadline)
    tokens, cost = pool.tokens_left(), pool.cost_left()
    if tokens is not None and tokens <= 0:
        raise LimitSpentError(
            f"the token limit of the top reply is spent (agent {agent.name} used "
            f"{pool.used_tokens} tokens)",
            metadata={"limit": "tokens", "agent": agent.name},
        )
    if cost is not None and cost <= 0:
        raise LimitSpentError(
            f"the cost limit of the top reply is spent (agent {agent.name} spent "
            f"{pool.used_cost:.6f} USD)",
            metadata={"limit": "costUsd", "agent": agent.name},
        )


def _late(agent: AgentView, deadline: float) -> DeadlineExceededError:
    when = _when(deadline)
    return DeadlineExceededError(
        f"the deadline of the top reply ({when}) passed while agent {agent.name} ran",
        metadata={"deadline": when, "agent": agent.name},
    )


async def _cut_stream(
    agent: AgentView, stream: AsyncIterator[ModelChunk], deadline: float, due: float
) -> AsyncIterator[ModelChunk]:
    try:
        while True:
            async with asyncio.timeout_at(due):
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    return
            yield chunk
    except TimeoutError:
        raise _late(agent, deadline) from None
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def _cut_run(
    agent: AgentView, pool: Pool, call_id: str, events: AsyncIterator[AgentEvent]
) -> AsyncIterator[AgentEvent]:
    assert pool.deadline is not None
    due = pool.due()
    try:
        while True:
            at = due + DELEGATION_GRACE if call_id in pool.delegated else due
            async with asyncio.timeout_at(at) as timer:
                pool.timers[call_id] = timer
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
            yield event
    except TimeoutError:
        raise _late(agent, pool.deadline) from None
    finally:
        pool.timers.pop(call_id, None)
        await events.aclose()  # type: ignore[attr-defined]


class _Reserved(PropagatedLimitMiddleware):
    """The limit inside a local child: its pool is reserved from the parent's."""

    def __init__(self, parent: Pool, per_child: int | None, top: int | None) -> None:
        super().__init__(per_child=per_child)
        self.parent = parent
        self.top = top

    def _open(self, outer: _Open | None) -> Pool:
        return self.parent.reserve(self.per_child)

    def _top(self, outer: _Open | None, pool: Pool) -> int | None:
        return self.top

    def _resume(self, pool: Pool, left: dict[str, Any]) -> None:
        """Only the deadline: the fresh reservation is what the parent has left now (the
        parent restored its own remainder), and what the child spent before its pause is
        counted in the parent's restored totals already."""
        _restore_deadline(pool, left)


class RequestLimitMiddleware(PropagatedLimitMiddleware):
    """The limits a caller sent with the reply (`ReplyOptions.limits`, an A2A message's
    limits extension), with an absolute deadline; reports what was spent (`SPENT_EVENT`).
    `fresh`: the caller sent them with the resume of a paused reply (`ResumeRequest.limits`),
    so they replace what was left of the paused step's."""

    def __init__(
        self, limits: Limits, prices: tuple[float, float] = (0.0, 0.0), *, fresh: bool = False
    ) -> None:
        super().__init__(
            limits.tool_calls,
            tokens=limits.tokens,
            cost_usd=limits.cost_usd,
            input_usd_per_mtok=prices[0],
            output_usd_per_mtok=prices[1],
            report=True,
        )
        self.limits = limits
        self.fresh = fresh

    def _limits(self) -> Limits:
        return self.limits

    def _slot(self, outer: _Open | None) -> tuple[str, int]:
        """A slot of its own, and no depth among the configured limits (see the base's)."""
        return CALLER_SLOT, outer.configured if outer is not None else 0

    def _go_on(self, pool: Pool, left: dict[str, Any], outer: _Open | None) -> None:
        """What is left, not what was spent: the caller was sent the report of the step
        before the pause and counted it, so this step's report holds only its own. Fresh
        limits are the caller's own count of what is left: nothing to restore."""
        if not self.fresh:
            _restore(pool, left)

    def _continue(self, pool: Pool, left: dict[str, Any], outer: _Open | None) -> None:
        """A cut-off reply sent its caller no report (one comes with the reply's end), so
        what it spent before the cut is counted in the report it will send."""
        _restore(pool, left)
        pool.used_calls, pool.used_tokens, pool.used_cost = left["used"]


def inherited(agent: AgentView, call_id: str = "") -> list[Middleware]:
    """The middlewares a local sub-agent started in `agent`'s reply (by tool call `call_id`)
    runs under so that it is bound by that reply's limits: none when the reply has none.
    The sub-agent ends itself at the deadline, so the call gets `DELEGATION_GRACE`."""
    found = _OPEN.get(agent.reply_id)
    if found is None:
        return []
    if call_id:
        found.pool.delegate(call_id)
    return [_Reserved(found.pool, found.per_child, found.top)]


@dataclass(slots=True)
class RemoteShare:
    """What a remote agent called from a bounded reply may spend, and its pool."""

    pool: Pool
    limits: Limits


def remote_share(agent: AgentView, call_id: str) -> RemoteShare | None:
    """Reserve a remote agent's share for tool call `call_id` of `agent`'s reply (None when
    the reply has no limits): `limits` is what to send it; settle `pool` with its report."""
    found = _OPEN.get(agent.reply_id)
    if found is None:
        return None
    child = found.pool.reserve(found.per_child)
    found.pool.delegate(call_id)
    return RemoteShare(child, child.remaining())


__all__ = [
    "DELEGATION_GRACE",
    "SPENT_EVENT",
    "DeadlineExceededError",
    "LimitSpentError",
    "Pool",
    "PropagatedLimitMiddleware",
    "RemoteShare",
    "RequestLimitMiddleware",
    "inherited",
    "remote_share",
]
