"""AgentView: all a hook may use of the agent it runs in, the same in process and in a sidecar.

Hooks are typed against this protocol, not against `Agent`: the in-process `Agent` and the
sidecar's stand-in both satisfy it, so mypy shows that a middleware written against it can be
served remotely unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hookmesh.models import ChatModel, ModelRef
    from hookmesh.schema import AgentEvent, Message, MessageKind, StructuredOutput
    from hookmesh.tools import ToolInfo


class StateView(Protocol):
    """What a hook sees of the agent's state."""

    @property
    def context(self) -> list[Message]:
        """The conversation in the agent's kind, without the system prompt. Edit it in place.
        A sidecar holds it only when its Describe asked for the context (``needs_context``)."""
        ...

    @property
    def middle_context(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Middleware state, ``[middleware_key][reply_id] -> JSON object``; a sidecar holds
        only its own slice. Use `Middleware.state(agent)` rather than this directly."""
        ...


class AgentView(Protocol):
    """The agent as a hook sees it."""

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
        """The running reply's id (state is kept per reply under it)."""
        ...

    @property
    def session_id(self) -> str:
        """The session the reply belongs to ('' outside a service)."""
        ...

    @property
    def user_id(self) -> str:
        """The end user the agent answers, when a service knows it ('' otherwise)."""
        ...

    @property
    def state(self) -> StateView:
        """The context and middleware state."""
        ...

    @property
    def model(self) -> ChatModel | None:
        """The agent's own chat model, for a middleware that asks a model itself (a
        summariser, a selector); None in a sidecar, which has no model to call: such a
        middleware takes its own model there."""
        ...

    @property
    def output(self) -> StructuredOutput | None:
        """The reply's structured answer once it validated (so `after_agent` sees the value
        the reply_end will carry); None before that, and for a reply that asks for none."""
        ...

    def emit(self, event: AgentEvent) -> None:
        """Add `event` to the reply's stream from a hook that returns a result instead of
        events (it follows the current model call or tool run)."""
        ...

    def resolve_model(self, name: str) -> ModelRef:
        """The model configured under `name`, for ``next_handler(model=...)`` in
        on_model_call (a sidecar sends the name; the agent resolves it)."""
        ...

    def tool(self, name: str) -> ToolInfo | None:
        """The agent's tool called `name`; None when there is none, and always in a sidecar,
        which is not told the agent's tools."""
        ...
