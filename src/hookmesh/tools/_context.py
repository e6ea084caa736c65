"""A tool's run context: what a run may receive besides its arguments (the agent it runs in,
the call), and the two ways a run ends other than by returning."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

from hookmesh.schema import ToolCall, ToolOutputBlock

AgentT = TypeVar("AgentT")
"""The view of the agent a tool is typed against: a middleware's tool takes
``ToolContext[hookmesh.middleware.AgentView]`` (this floor sits below the middleware core, so
it leaves the view to the tool; the in-process agent and a sidecar's stand-in both satisfy
AgentView)."""


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[AgentT]):
    """What a tool's run receives when its function has a parameter annotated with this type
    (bare or subscripted). The parameter is found once, when the `Tool` is built, and is left
    out of the schema the model sees.

    A middleware's tool annotates it ``ToolContext[AgentView]``, keeps what it needs for the
    reply in ``self.state(context.agent)`` (never on ``self``: one instance serves concurrent
    replies), and may yield, besides text and media, `AgentEvent`s for the reply's stream:
    nested events of a run it drives (``source_path`` set) and ``custom``, ``hint_block`` or
    ``data_block_*`` events of the reply itself. Behind a sidecar the same run gets the same
    context through ``CallTool``; its state changes and events travel back.

    Attributes:
        agent: The agent running the call (in a sidecar, its stand-in): its name, kind,
            reply, session and user ids, and its state (the context, ``middle_context``).
        call: The call being run, with the arguments that run (after any override).
        idempotency_key: The call's key, stable across its runs.
    """

    agent: AgentT
    call: ToolCall
    idempotency_key: str = ""
    """A key for this call's effect, the same on every run of it: a retry, a run again after
    the reply was continued by another replica (`idempotency_key`). Hand it to the system
    the tool changes (a payment's idempotency key, a request id) so a repeated call has no
    second effect; then mark the tool ``idempotent=True`` so a cut-off run may run again."""


def idempotency_key(reply_id: str, call_id: str) -> str:
    """The idempotency key of one tool call of one reply (`ToolContext.idempotency_key`)."""
    return f"{reply_id}:{call_id}"


class ToolError(Exception):
    """Raised by a tool's run to end it as an error result reading exactly `output` (after what
    the run yielded), where any other exception reads ``Error: <type>: <message>``: for a
    tool whose failures are answers the model should read as they are (an MCP server's error
    content, "Error: there is no task '9'").

    Args:
        output: The rest of the result: text, or text and media blocks.
    """

    def __init__(self, output: str | Sequence[ToolOutputBlock] = "") -> None:
        super().__init__(output if isinstance(output, str) else "the tool failed")
        self.output: str | list[ToolOutputBlock] = (
            output if isinstance(output, str) else list(output)
        )


class AbortReply(Exception):
    """Raised by a tool's run when the middleware that contributed the tool failed (its
    service is down) and the call must not be answered. The agent blames that middleware
    and applies its failure mode: ``fail_closed`` ends the reply with `error` (its reason
    and metadata when it is a `HookmeshError`, source ``middleware:<key>``); ``fail_open``
    logs it and answers the call with an error result reading ``Error: <error>``. A tool no
    middleware contributed ends the reply with `error` as the agent's own failure.

    Args:
        error: What failed.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def is_context(annotation: Any) -> bool:
    """Whether `annotation` is `ToolContext`, one of its subscriptions, or either ``| None``
    (a tool that may also run outside a reply)."""
    if annotation is ToolContext or get_origin(annotation) is ToolContext:
        return True
    members = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else ()
    return type(None) in members and any(is_context(m) for m in members if m is not type(None))


def context_parameter(func: Callable[..., Any], tool_name: str) -> str | None:
    """The parameter of `func` annotated `ToolContext`, or None (read once per tool).

    Raises:
        TypeError: Two such parameters, or a ``ToolContext`` annotation that does not resolve
            (its names must be importable where the function is defined, not only under
            ``TYPE_CHECKING``).
    """
    try:
        hints = inspect.get_annotations(func, eval_str=True)
    except Exception:
        raw = getattr(func, "__annotations__", None) or {}
        if any(isinstance(a, str) and "ToolContext" in a for a in raw.values()):
            raise TypeError(
                f"tool {tool_name}: its ToolContext annotation does not resolve at run time"
            ) from None
        return None
    found = [name for name, a in hints.items() if name != "return" and is_context(a)]
    if len(found) > 1:
        raise TypeError(f"tool {tool_name}: one parameter may take the ToolContext, not {found}")
    return found[0] if found else None
