"""The chat-model interface the agent calls: one full response, or a stream of chunks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hookmesh.errors import HookmeshError
from hookmesh.schema import Message, MessageKind, Usage

ToolChoice = str
"""``auto``, ``none``, ``required``, or the name of the one tool the model must call."""

TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of a streamed tool call; pieces sharing `call_id` concatenate their arguments."""

    call_id: str
    """Id of the call; every piece of one call carries it."""
    name: str = ""
    """Tool name; set on the first piece of a call."""
    arguments: str = ""
    """A fragment of the JSON arguments text."""


@dataclass(slots=True)
class ModelChunk:
    """One streamed increment. Any field may be empty; usage and stop reason come last."""

    text: str = ""
    """Answer text to append."""
    reasoning: str = ""
    """Reasoning text to append."""
    tool_call: ToolCallDelta | None = None
    """A tool-call piece."""
    usage: Usage | None = None
    """Token usage of the whole call (usually on the final chunk)."""
    stop_reason: str = ""
    """Why the model stopped (``stop``, ``tool_calls``, ``length``...), on the final chunk."""
    response_id: str = ""
    """The provider's response id, when sent."""


STOP_CUT = "cut"
"""The stop reason of a stream a middleware ended early (a sidecar's plain `done` mid-stream):
its text so far stands, the tool calls it streamed are never run (their arguments may be
incomplete)."""


@dataclass(slots=True)
class ModelResponse:
    """A complete model answer."""

    message: Message
    """The assistant message, in the kind the agent asked for."""
    usage: Usage | None = None
    """Token usage, when reported."""
    stop_reason: str = ""
    """Why the model stopped."""
    response_id: str = ""
    """The provider's response id, when sent."""


FINAL_TOOL = "final_answer"
"""The tool a model answers with when a structured answer is asked through a tool (the
agent's tool strategy, for models without a JSON-schema mode)."""


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """A structured answer asked of a model's own JSON-schema mode (`ChatModel.native_output`):
    its answer text must be a JSON value valid for `schema`."""

    name: str
    """The format's name (1-64 characters of A-Z a-z 0-9 _ -)."""
    schema: dict[str, Any]
    """The JSON Schema of the answer."""
    description: str = ""
    """What the answer is for, when said."""


ModelResult = ModelResponse | AsyncIterator[ModelChunk]
"""What a model call (and the `on_model_call` hook) returns."""


class ModelError(HookmeshError):
    """The model could not answer (HTTP error, bad response, exhausted script...)."""

    reason = "MODEL_ERROR"
    source = "model"

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        body: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        meta = dict(metadata or {})
        if status:
            meta["httpStatus"] = str(status)
        super().__init__(message, metadata=meta)
        self.status = status
        self.body = body


class ModelRef(Protocol):
    """A model as a hook sees it: by its names. In process it is the `ChatModel` itself; in a
    sidecar, where no model can be called, a stand-in carrying the names (a model chosen with
    ``agent.resolve_model(name)`` is resolved by the agent)."""

    @property
    def model_name(self) -> str:
        """Name reported in model_call events and traces."""
        ...

    @property
    def provider_name(self) -> str:
        """Provider reported in traces."""
        ...


class ChatModel(ABC):
    """A chat model producing messages of the agent's kind.

    Implementations decide per call whether to stream (`stream`); the agent handles both
    results the same way and emits the same events.
    """

    model_name: str = "model"
    """Name reported in model_call events and traces."""
    provider_name: str = "hookmesh"
    """Provider reported in traces (e.g. ``openai``)."""
    stream: bool = False
    """Whether `__call__` returns a chunk stream rather than a full response."""
    native_output: bool = False
    """Whether the model has a JSON-schema mode: `__call__` takes ``output=`` and constrains
    its answer to it. The agent passes ``output`` only to a model that says so (others get
    a final-answer tool instead: docs/structured-output.md)."""

    @abstractmethod
    async def __call__(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: ToolChoice = "auto",
        kind: MessageKind = "flat",
        output: OutputFormat | None = None,
    ) -> ModelResult:
        """Answer `messages`.

        Args:
            messages: The prompt, system message first, in the agent's kind.
            tools: Tool definitions: ``{"name", "description", "parameters"}`` (JSON schema).
            tool_choice: ``auto``, ``none``, ``required`` or one tool's name.
            kind: The kind of message to produce.
            output: When set (only for a model with `native_output`), the answer text must
                be JSON valid for this format.

        Returns:
            A `ModelResponse`, or an async iterator of `ModelChunk` when streaming.

        Raises:
            ModelError: The model failed; the message says why.
        """
