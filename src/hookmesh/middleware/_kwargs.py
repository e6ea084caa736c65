"""The typed kwargs of each onion hook and the overrides its `next_handler` accepts.

One table serves both sides: the in-process chain refuses an override the hook does not take,
and the remote codec carries exactly these (a sidecar can send no other), so an override that
works in process but not behind a sidecar is a type error, not a silent difference.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from typing_extensions import Unpack

from hookmesh.schema import AgentEvent, Message, Resume, ToolCall
from hookmesh.tools import Tool

if TYPE_CHECKING:
    from hookmesh.middleware._permission import PermissionDecision
    from hookmesh.models import ModelRef, ModelResult
    from hookmesh.tools import ToolInfo


class ReplyArgs(TypedDict):
    """on_reply kwargs."""

    inputs: list[Message]
    """The new messages (ids set), or empty when the reply resumes."""
    resume: Resume | None
    """The resume payload, or None for a new reply (a sidecar is told that the reply resumes,
    not the answers: it gets an empty `Resume`)."""


class ReasoningArgs(TypedDict):
    """on_reasoning kwargs."""

    tool_choice: str
    """``auto``, ``none``, ``required`` or one tool's name."""


class ModelCallArgs(TypedDict):
    """on_model_call kwargs."""

    model: ModelRef
    """The model to be called (in process, the `ChatModel`)."""
    messages: list[Message]
    """The prompt, system message first (a sidecar sees it only with ``needs_context``)."""
    tools: list[dict[str, Any]]
    """Tool definitions offered: ``{"name", "description", "parameters"}``."""
    tool_choice: str
    """``auto``, ``none``, ``required`` or one tool's name."""


class ActingArgs(TypedDict):
    """on_acting kwargs."""

    tool_call: ToolCall
    """The call being run."""
    tool: ToolInfo
    """The tool it calls."""
    arguments: dict[str, Any]
    """The call's arguments, parsed and validated against the tool's schema."""


class PermissionArgs(TypedDict):
    """on_check_permission kwargs."""

    tool_call: ToolCall
    """The call to decide on."""
    tool: ToolInfo
    """The tool it calls."""


class CompressArgs(TypedDict):
    """on_compress_context kwargs: none yet."""


class ReasoningOverrides(TypedDict, total=False):
    """What on_reasoning may change downstream."""

    tool_choice: str


class ModelCallOverrides(TypedDict, total=False):
    """What on_model_call may change downstream. `messages` needs ``needs_context`` in a
    sidecar; `model` must come from ``agent.resolve_model(name)``; `tools` may only keep a
    subset of the definitions offered (a sidecar sends their names)."""

    model: ModelRef
    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: str


class ActingOverrides(TypedDict, total=False):
    """What on_acting may change downstream: the arguments the tool runs with (validated
    against its schema; the call then records them)."""

    arguments: dict[str, Any]


class ReplyNext(Protocol):
    """`next_handler` of on_reply: it takes no overrides."""

    def __call__(self) -> AsyncIterator[AgentEvent]: ...


class ReasoningNext(Protocol):
    """`next_handler` of on_reasoning."""

    def __call__(self, **overrides: Unpack[ReasoningOverrides]) -> AsyncIterator[AgentEvent]: ...


class ModelCallNext(Protocol):
    """`next_handler` of on_model_call: await it for a response or a chunk stream."""

    def __call__(self, **overrides: Unpack[ModelCallOverrides]) -> Awaitable[ModelResult]: ...


class ActingNext(Protocol):
    """`next_handler` of on_acting."""

    def __call__(self, **overrides: Unpack[ActingOverrides]) -> AsyncIterator[AgentEvent]: ...


class PermissionNext(Protocol):
    """`next_handler` of on_check_permission: it takes no overrides."""

    def __call__(self) -> Awaitable[PermissionDecision]: ...


class CompressNext(Protocol):
    """`next_handler` of on_compress_context: it takes no overrides."""

    def __call__(self) -> Awaitable[None]: ...


OVERRIDES: dict[str, frozenset[str]] = {
    "on_reply": frozenset(),
    "on_reasoning": frozenset(ReasoningOverrides.__annotations__),
    "on_model_call": frozenset(ModelCallOverrides.__annotations__),
    "on_acting": frozenset(ActingOverrides.__annotations__),
    "on_check_permission": frozenset(),
    "on_compress_context": frozenset(),
}
"""Per onion hook, the kwargs its `next_handler` may replace."""


def checked_overrides(
    hook: str, kwargs: Mapping[str, Any], overrides: dict[str, Any]
) -> dict[str, Any]:
    """`kwargs` with `overrides` applied, after refusing what the hook does not take; an
    acting override's arguments are validated and recorded in the call.

    Raises:
        TypeError: An override `hook` does not take (named, with those it takes).
        ToolArgumentError: Overridden arguments the tool's schema refuses.
    """
    unknown = overrides.keys() - OVERRIDES[hook]
    if unknown:
        takes = ", ".join(sorted(OVERRIDES[hook])) or "none"
        raise TypeError(
            f"next_handler of {hook} cannot override {', '.join(sorted(unknown))} "
            f"(it takes: {takes})"
        )
    out = {**kwargs, **overrides}
    if "arguments" in overrides:
        text = json.dumps(overrides["arguments"], ensure_ascii=False)
        tool = kwargs["tool"]
        out["arguments"] = (
            tool.parse_arguments(text) if isinstance(tool, Tool) else overrides["arguments"]
        )
        out["tool_call"] = kwargs["tool_call"].model_copy(update={"arguments": text})
    return out
