"""What one side of a shadowed invocation did, and the first way two sides differ."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hookmesh.remote._rollout import Disagreement

_SHORT = 160
"""Characters of each side kept in a disagreement sample."""


@dataclass
class Trace:
    """What one side did in one invocation."""

    called_next: bool = False
    overrides: str = ""
    output: list[str] = field(default_factory=list)
    error: str = ""
    state: str = ""
    handed: list[str] = field(default_factory=list)
    """The context as it called next (empty when it did not)."""
    context: list[str] = field(default_factory=list)
    """The context as it ended."""


def dump(value: Any) -> str:
    """`value` as compact JSON; an event without its reply id (the same on both sides)."""
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json(exclude={"reply_id"}, exclude_none=True))
    return json.dumps(value, sort_keys=True, default=repr)


_RANDOM_IDS: dict[str, Any] = {"id": True, "create_time": True, "blocks": {"__all__": {"id"}}}
"""What a message a middleware adds may take at random: its id, creation time and (agentic)
its blocks' ids (make_hint sets one)."""


def dump_context(context: list[Any]) -> list[str]:
    """Each message as compact JSON, without what it may take at random (`_RANDOM_IDS`), so
    the same version agrees."""
    return [str(m.model_dump_json(exclude=_RANDOM_IDS, exclude_none=True)) for m in context]


def disagreement(hook: str, reply_id: str, live: Trace, mine: Trace) -> Disagreement | None:
    """The first way the candidate differs from the live side, by weight, or None. A
    candidate calling next where the live side did not is a short circuit, not the error its
    next raised (there was no downstream result to give it). ``context`` compares the
    context each side handed to next, then the one it ended with."""
    checks: tuple[tuple[str, object, object], ...] = (
        ("error", live.error, mine.error),
        ("short_circuit", live.called_next, mine.called_next),
        ("overrides", live.overrides, mine.overrides),
        ("result" if hook in ("on_model_call", "on_check_permission") else "events", live.output,
         mine.output),
        ("state", live.state, mine.state),
        ("context", live.handed, mine.handed),
        ("context", live.context, mine.context),
    )  # fmt: skip
    if hook in ("on_system_prompt", "after_agent"):
        checks = (checks[0], ("prompt", live.output, mine.output), *checks[4:])
    elif mine.called_next and not live.called_next:  # its next failed for want of a result
        checks = (checks[1],)
    for kind, ours, theirs in checks:
        if ours != theirs:
            skip = shared_prefix(ours, theirs)
            return Disagreement(hook, kind, reply_id, _shown(ours, skip), _shown(theirs, skip))
    return None


def shared_prefix(ours: object, theirs: object) -> int:
    """How many leading items two outputs share (0 for anything else)."""
    if not (isinstance(ours, list) and isinstance(theirs, list)):
        return 0
    same = 0
    for a, b in zip(ours, theirs, strict=False):
        if a != b:
            break
        same += 1
    return same


def _shown(value: object, skip: int = 0) -> str:
    """One side as JSON (an error as its text) from its first item that differs (``…``
    stands for those before), cut to 160 characters."""
    if isinstance(value, list):
        text = ("[…," if skip else "[") + ",".join(value[skip:]) + "]"
    elif isinstance(value, bool):
        text = json.dumps({"called_next": value})
    else:
        text = str(value)
    return text[:_SHORT]
