"""Which downstream items each hook lets past, and how a description routes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hookmesh.v1 import event_pb2 as _event_pb2

ALL = "*"
"""A subscription to every item the hook has."""

PASS, VERDICT, READ_ONLY = 0, 1, 2
"""How an item travels: not sent; sent and answered by a verdict; sent and never answered."""

_EVENT_ARMS = tuple(f.name for f in _event_pb2.AgentEvent.DESCRIPTOR.oneofs_by_name["event"].fields)
_EMITTED = ("data_block_start", "data_block_delta", "data_block_end", "hint_block", "custom")
"""What an inner middleware may add to any event hook's stream."""

ITEMS: dict[str, frozenset[str]] = {
    "on_reply": frozenset(_EVENT_ARMS),
    "on_reasoning": frozenset(
        a
        for a in _EVENT_ARMS
        if a.startswith(("model_call_", "text_block_", "reasoning_block_", "tool_call_"))
    )
    | frozenset(_EMITTED),
    "on_acting": frozenset(
        ("tool_result_start", "tool_result_delta", "tool_result_end", *_EMITTED)
    ),
    "on_model_call": frozenset(("chunk",)),
    "on_check_permission": frozenset(),
    "on_compress_context": frozenset(),
    "on_system_prompt": frozenset(),
    "after_agent": frozenset(),
}
"""Per hook, the item names a subscription may use (AgentEvent arms, or "chunk")."""


def check_subscriptions(hook: str, subscriptions: Iterable[str], read_only: Iterable[str]) -> None:
    """Refuse names the hook has no items for, and names in both lists.

    Raises:
        ValueError: Names the first bad item and lists the valid ones for `hook`.
    """
    valid = ITEMS[hook]
    verdict = set(subscriptions)
    passing = set(read_only)
    for name in sorted(verdict | passing):
        if name != ALL and name not in valid:
            names = ", ".join(sorted(valid)) or "none"
            raise ValueError(f'{hook} has no item {name!r}; valid: {names} (or "*" for all)')
    both = verdict & passing
    if both:
        raise ValueError(
            f"{hook}: {', '.join(sorted(both))} in both subscriptions and read_only_subscriptions"
        )


@dataclass(frozen=True, slots=True)
class Routes:
    """One hook's mode and how each of its items travels (PASS, VERDICT or READ_ONLY)."""

    mode: str
    named: dict[str, int]
    default: int

    @classmethod
    def of(cls, mode: str, subscriptions: Iterable[str], read_only: Iterable[str]) -> Routes:
        verdict, passing = set(subscriptions), set(read_only)
        named = {n: READ_ONLY for n in passing if n != ALL}
        named.update({n: VERDICT for n in verdict if n != ALL})
        default = VERDICT if ALL in verdict else READ_ONLY if ALL in passing else PASS
        return cls(mode, named, default)

    def route(self, item: str) -> int:
        """How `item` (an event type, or "chunk") travels."""
        return self.named.get(item, self.default)

    def sends(self, item: str) -> bool:
        """Whether `item` goes to the sidecar at all."""
        return self.named.get(item, self.default) != PASS
