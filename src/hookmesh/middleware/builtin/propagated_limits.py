"""A tool-call budget set on the top reply that bounds the local sub-agents below it: each
child reserves its share from the parent's remainder, and gives back what it did not use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from hookmesh.middleware import AgentView, PermissionArgs, PermissionNext, ReplyArgs, ReplyNext
from hookmesh.middleware._base import Middleware, PermissionDecision
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.schema import AgentEvent


@dataclass(slots=True)
class Pool:
    """Tool calls a reply may still make; a child's pool was taken out of its parent's."""

    left: int
    """Calls still allowed."""
    reserved: int
    """Calls this pool started with."""
    parent: Pool | None = None

    def take(self) -> bool:
        """Spend one call if any is left. No await between test and change: atomic in the
        event loop, so concurrent tool checks cannot both take the last call."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def reserve(self, cap: int | None) -> Pool:
        """A child pool of `cap` calls (all that is left when None, or when less is left),
        taken out of this one at once."""
        n = self.left if cap is None else min(cap, self.left)
        self.left -= n
        return Pool(n, n, self)

    def release(self) -> None:
        """Give the unused calls back to the parent."""
        if self.parent is not None:
            self.parent.left += self.left
            self.left = 0


_OPEN: dict[str, tuple[Pool, int | None, int]] = {}
"""The pool of every running reply under a propagated limit, with the per-child cap and
the top limit, by reply id (in process)."""


class PropagatedLimitMiddleware(Middleware):
    """Caps the tool calls of a reply and of every local sub-agent a handoff starts in it.

    A reply under this middleware has a pool of `tool_calls`. Each tool call it allows
    takes one from the pool before it runs (in ``on_check_permission``, after the other
    permission checks); with the pool empty the call is denied with a reason naming the
    limit, and the model sees that as the call's result. A handoff receiver (see
    `hookmesh.middleware.builtin.handoff`) started in such a reply reserves, when it
    starts, `per_child` calls (or all that is left when None) out of the parent's pool at
    once, spends from its own pool the same way, and gives back what it did not use when
    it ends; a receiver's receivers do the same from it. So the calls of a reply and of
    everything below it, parallel children included, never exceed `tool_calls`.

    Not supported: skill forks and remote (A2A) agents (they do not reserve), tokens and
    deadlines, a reply that pauses and resumes (the pool starts full again), a sidecar.

    Example:
        >>> agent = Agent(model, middlewares=[PropagatedLimitMiddleware(20), handoffs])

    Args:
        tool_calls: Tool calls the reply and its sub-agents may make together (>= 0).
        per_child: Most calls one child reserves; None: all that is left.
    """

    def __init__(self, tool_calls: int, *, per_child: int | None = None) -> None:
        self.tool_calls = check.whole("tool_calls", tool_calls, minimum=0)
        self.per_child = check.optional_whole("per_child", per_child)

    def middleware_key(self) -> str:
        return "propagated_limits"

    def _open(self) -> Pool:
        return Pool(self.tool_calls, self.tool_calls)

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Open this reply's pool for its run; give back what is left when it ends."""
        pool = self._open()
        _OPEN[agent.reply_id] = (pool, self.per_child, self.tool_calls)
        try:
            async for event in next_handler():
                yield event
        finally:
            _OPEN.pop(agent.reply_id, None)
            pool.release()

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        decision = await next_handler()
        found = _OPEN.get(agent.reply_id)
        if decision.behavior == "deny" or found is None:
            return decision
        pool, _, top = found
        if pool.take():
            return decision
        return PermissionDecision(
            "deny",
            f"the tool-call limit of the top reply is spent ({top} calls in all; "
            f"this agent had {pool.reserved})",
        )


class _Reserved(PropagatedLimitMiddleware):
    """The limit inside a child: its pool is reserved from the parent's when it starts."""

    def __init__(self, parent: Pool, per_child: int | None, top: int) -> None:
        super().__init__(top, per_child=per_child)
        self.parent = parent

    def _open(self) -> Pool:
        return self.parent.reserve(self.per_child)


def inherited(agent: AgentView) -> list[Middleware]:
    """The middlewares a sub-agent started in `agent`'s reply runs under so that it is bound
    by that reply's limits: none when the reply has none."""
    found = _OPEN.get(agent.reply_id)
    if found is None:
        return []
    pool, per_child, top = found
    return [_Reserved(pool, per_child, top)]


__all__ = ["Pool", "PropagatedLimitMiddleware", "inherited"]
