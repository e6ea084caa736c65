"""A tool's run context: what a run may receive besides its arguments (the agent it runs in,
the call), and the two ways a run ends other than by returning."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, get_origin

from hookmesh.schema import Message, MessageKind, ToolCall, ToolOutputBlock


class StateInfo(Protocol):
    """What a tool's run sees of the agent's state."""

    @property
    def context(self) -> list[Message]:
        """The conversation in the agent's kind (a sidecar holds it only when its middleware
        declares ``needs_context``)."""
        ...

    @property
    def middle_context(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Middleware state, ``[middleware_key][reply_id] -> JSON object``; a middleware's
        tool reaches its own slice through ``Middleware.state(agent)``."""
        ...


class AgentInfo(Protocol):
    """The agent as a tool's run sees it: who runs the call, for which reply, session and
    user, and its state. `hookmesh.middleware.AgentView` (a middleware's view) satisfies it,
    and so do the in-process agent and a sidecar's stand-in."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def kind(self) -> MessageKind:
        """``flat`` or ``agentic``: the kind of every message in the context."""
        ...

    @property
    def reply_id(self) -> str:
        """The running reply's id (per-reply state is kept under it)."""
        ...

    @property
    def session_id(self) -> str:
        """The reply's session ('' outside a service)."""
        ...

    @property
    def user_id(self) -> str:
        """The end user the agent answers ('' when no one authenticated)."""
        ...

    @property
    def state(self) -> StateInfo:
        """The context and the middlewares' per-reply state."""
        ...


AgentT = TypeVar("AgentT", bound=AgentInfo)
"""The view of the agent a tool is typed against (a middleware's: ``AgentView``)."""


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
        agent: The agent running the call (in a sidecar, its stand-in).
        call: The call being run, with the arguments that run (after any override).
    """

    agent: AgentT
    call: ToolCall


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
    """Whether `annotation` is `ToolContext` or one of its subscriptions."""
    return annotation is ToolContext or get_origin(annotation) is ToolContext


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
