"""What a middleware says of itself: its key, failure mode, and per hook its mode and the
downstream items it subscribes to. One description per instance; a sidecar host sends it as
`Describe` one to one, and a remote proxy holds the one it received."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from hookmesh.v1 import event_pb2 as _event_pb2

FailureMode = Literal["fail_closed", "fail_open"]
"""What a middleware's error does: end the reply (closed) or skip the middleware (open)."""
HookMode = Literal["intercept", "pre_only", "observe"]
"""How a hook runs behind a sidecar: every phase, one round trip, or send and go."""

ALL = "*"
"""A subscription to every item the hook has."""

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
class HookSpec:
    """How one hook runs behind a sidecar."""

    mode: HookMode = "intercept"
    """``intercept``, ``pre_only`` or ``observe``."""
    subscriptions: tuple[str, ...] = ()
    """Downstream items the sidecar answers with a verdict (``"*"`` for all)."""
    read_only_subscriptions: tuple[str, ...] = ()
    """Downstream items the sidecar sees as they pass, never answering."""


@dataclass(frozen=True, slots=True)
class MiddlewareDescription:
    """A middleware's description: what `Describe` carries, in Python.

    Raises:
        ValueError: (on construction) a hook with items it has none of, or an item in both
            subscription lists.
    """

    key: str
    """Key of its slice of `middle_context`."""
    hooks: Mapping[str, HookSpec]
    """The hooks it implements, each with how it runs remotely."""
    failure_mode: FailureMode = "fail_closed"
    """What its error does."""
    needs_context: bool = False
    """Invocations carry the conversation context (it costs bytes per call)."""
    local_only_reason: str = ""
    """Why a sidecar cannot serve it ('' when one can)."""
    tools: tuple[str, ...] = field(default=())
    """Names of the tools it contributes."""

    def __post_init__(self) -> None:
        for hook, spec in self.hooks.items():
            try:
                check_subscriptions(hook, spec.subscriptions, spec.read_only_subscriptions)
            except ValueError as exc:
                raise ValueError(f"{self.key}: {exc}") from None


def default_subscriptions(
    hook: str,
    subscriptions: Mapping[str, tuple[str, ...]],
    read_only: Mapping[str, tuple[str, ...]],
) -> tuple[str, ...]:
    """A hook's verdict subscriptions: as given, else every item (``"*"``) unless it names
    read-only ones (then none), so a served middleware sees all it would see in process."""
    if hook in subscriptions:
        return tuple(subscriptions[hook])
    return (ALL,) if ITEMS[hook] and hook not in read_only else ()
