"""What a hook sees inside a sidecar: an `AgentView` made from one invocation, with stand-ins
for the model and tool the invocation names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from hookmesh.models import ChatModel
from hookmesh.schema import AgentEvent, Message, MessageKind, StructuredOutput
from hookmesh.v1 import middleware_pb2 as _mw_pb2


class HostState:
    """What a hook sees of `agent.state` in the sidecar: the context it asked for and its own
    slice (an AgentState's shape without its validation cost on every invocation)."""

    __slots__ = ("context", "middle_context")

    def __init__(
        self, context: list[Message], middle_context: dict[str, dict[str, dict[str, Any]]]
    ) -> None:
        self.context = context
        self.middle_context = middle_context


class SidecarAgent:
    """The agent as a hook sees it inside the sidecar (an `AgentView`): name, kind, reply,
    session, user, its state slice and the context it asked for; no model and no tools."""

    def __init__(
        self,
        name: str,
        kind: MessageKind,
        reply_id: str,
        session_id: str,
        state: HostState,
        emit: Callable[[AgentEvent], None] | None = None,
        user_id: str = "",
        output: StructuredOutput | None = None,
    ) -> None:
        self.name = name
        self.kind: MessageKind = kind
        self.reply_id = reply_id
        self.session_id = session_id
        self.user_id = user_id
        """The end user the agent answers (see `Agent.user_id`)."""
        self.state = state
        self.model: ChatModel | None = None
        """Always None: the agent's model cannot be called from a sidecar."""
        self.output = output
        """The reply's structured answer: set in `after_agent` when the reply has one."""
        self._emit = emit

    def emit(self, event: AgentEvent) -> None:
        """Send an event to the agent's reply stream."""
        if self._emit is not None:
            self._emit(event)

    def resolve_model(self, name: str) -> ModelChoice:
        """The model configured as `name` in the agent (resolved there, on call_next)."""
        return ModelChoice(name)

    def tool(self, name: str) -> ToolRef | None:
        """None: a sidecar is not told the agent's tools."""
        return None


class ModelRefPb:
    """The model named in an on_model_call invocation (the sidecar cannot call it)."""

    def __init__(self, model_name: str, provider_name: str) -> None:
        self.model_name = model_name
        self.provider_name = provider_name


class ModelChoice:
    """A model a sidecar's middleware chose by configured name; the agent resolves it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.model_name = name
        self.provider_name = ""


class ToolRef:
    """The tool named in an on_acting or on_check_permission invocation."""

    def __init__(self, spec: _mw_pb2.ToolSpec) -> None:
        self._spec = spec
        self.name = spec.name
        self.description = spec.description
        self.read_only = spec.read_only
        self.concurrency_safe = spec.concurrency_safe
        self.return_directly = spec.return_directly
        self.needs_confirmation = spec.needs_confirmation
        self.idempotent = spec.idempotent
        self.external = False
        """The protocol does not carry it: a tool reaching a hook runs in the agent."""

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (decoded when first asked for)."""
        return json_format.MessageToDict(self._spec.parameters)
