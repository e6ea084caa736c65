"""Checkpoints: the points of a reply at which its state can be saved so that another process
continues it, and what happens to a tool call cut off mid-run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, NamedTuple

StepKind = Literal["input", "model", "tools", "results"]
"""``input``: the user's messages are in the context, no step ran yet; ``model``: a model
response with tool calls is in the context; ``tools``: those calls are about to run (their
ids in `StepPoint.calls`); ``results``: their results are in the context."""


class StepPoint(NamedTuple):
    """One point of a reply at which its checkpoint callback is awaited."""

    kind: StepKind
    """Which boundary."""
    reply_id: str
    """The reply."""
    calls: tuple[str, ...] = ()
    """For ``tools``: the ids of the calls about to run."""


Checkpoint = Callable[[StepPoint], Awaitable[None]]
"""Awaited by the agent at each step boundary of a reply (`Agent.reply(checkpoint=...)`):
save `Agent.checkpoint_state()` before it returns, and the reply can be continued from there
in any process. An exception it raises ends the reply as one raised by the loop would; a
`ReplyHandedOver` it raises stops the reply at once, as the process leaves it to another."""

OutcomePolicy = Literal["ask", "tell_model", "fail"]
"""What a continued reply does with a call that started but has no result and whose tool is
neither idempotent nor read-only, so running it again could repeat its effect: ``ask`` the
user to confirm running it again (the reply pauses, the reason says the outcome is unknown),
``tell_model`` (its result says the outcome is unknown, and the reply goes on), or ``fail``
(the reply ends with reason TOOL_OUTCOME_UNKNOWN)."""

OUTCOME_UNKNOWN = (
    "The outcome of this call is unknown: it was cut off while running, and the tool is not "
    "safe to run twice, so it was not run again. Check whether it took effect before calling "
    "it again."
)
"""The result (``tell_model``) or confirmation reason (``ask``) of such a call."""


class ReplyHandedOver(BaseException):
    """Raised by a checkpoint callback to stop the reply where it stands, leaving it to
    another process (a draining replica); the agent neither ends nor answers it."""
