"""A handoff to a remote A2A agent: the transfer sends the history its input filter lets
through and the message as one task, under the reply's propagated limits (the limits
extension), and the remote agent's answer takes over the reply or hands back."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
import httpx
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2

from hookmesh.a2a import LIMITS_METADATA_KEY, data_part, limits_json
from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._nested import ForkOutcome
from hookmesh.middleware.builtin._support._tool_io import output_text
from hookmesh.middleware.builtin.propagated_limits import remote_share
from hookmesh.middleware.builtin.remote_agent import RemoteAgent, RemoteAgentConfig, TaskOutcome
from hookmesh.models import ChatModel
from hookmesh.schema import AgentEvent, EventSource, Resume, ToolCall, nest

HISTORY_PREFIX = "The conversation so far:\n"
"""What the text part carrying the history starts with (``[role] text`` lines)."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_FILTERS = ("all", "last", "summary", "none")
_CALL_FAILURES = (A2AClientError, httpx.HTTPError, grpc.RpcError, OSError)


def check_handoff(name: str, input_filter: str) -> None:
    """Refuse a handoff (local or remote) whose name cannot name its tool, or an unknown
    history filter, at construction rather than at the first transfer."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"handoff name {name!r} must match {_NAME.pattern} (it names a tool)")
    if input_filter not in _FILTERS:
        raise ValueError(f"input_filter must be one of {', '.join(_FILTERS)}, not {input_filter!r}")


OPEN_FAILURES = (A2AClientError, httpx.HTTPError, ValueError, OSError)
"""What opening a receiver's client (reading its card) may raise."""


@dataclass(frozen=True, slots=True)
class RemoteHandoff:
    """A remote A2A agent that a reply can transfer to (`HandoffMiddleware` takes it next to
    local `Handoff`s).

    Args:
        name: The receiver's name (lower case, digits, ``_``); the tool is
            ``transfer_to_<name>``, and its events and answer are named after it.
        url: The agent's base URL (its card is at ``/.well-known/agent-card.json`` below).
        description: What it is for, shown to the model in the tool's description.
        input_filter: ``all`` (default), ``last``, ``summary`` or ``none``, as for `Handoff`.
        last_n: Messages kept by ``last``.
        hand_back: Its answer returns to the parent as the tool result; without it (default)
            its answer is the reply's final answer.
        summary_model: The model that writes the ``summary``; None uses the parent's.
        token_env: Environment variable holding a bearer token for it (a secret).
        binding: ``JSONRPC``, ``HTTP+JSON`` or ``GRPC``; by default the card's first.
        timeout: Seconds one task step may take.
    """

    name: str
    url: str
    description: str
    input_filter: Literal["all", "last", "summary", "none"] = "all"
    last_n: int = 4
    hand_back: bool = False
    summary_model: ChatModel | None = None
    token_env: str | None = None
    binding: Literal["JSONRPC", "HTTP+JSON", "GRPC"] | None = None
    timeout: float = 600.0
    remote: RemoteAgent = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_handoff(self.name, self.input_filter)
        if not self.description.strip():
            raise ValueError(f"remote handoff {self.name} needs a description")
        check.whole("last_n", self.last_n)
        config = RemoteAgentConfig(
            name=self.name,
            url=self.url,
            token_env=self.token_env,
            binding=self.binding,
            timeout=self.timeout,
        )
        object.__setattr__(self, "remote", RemoteAgent(config))

    @property
    def tool_name(self) -> str:
        """The transfer tool's name."""
        return f"transfer_to_{self.name}"


def transfer_parts(history: str, message: str) -> list[a2a_pb2.Part]:
    """The task's message: the history as one text part (`HISTORY_PREFIX`, then the lines),
    when there is any, then `message`."""
    parts = [a2a_pb2.Part(text=HISTORY_PREFIX + history)] if history else []
    return [*parts, a2a_pb2.Part(text=message)]


def answer_parts(resume: Resume) -> list[a2a_pb2.Part]:
    """The message answering a paused remote receiver: ``{"confirmed": true}`` approving
    what it asked to run, or, for its external calls, ``{"external_results": [{"call_id",
    "output", "state"}]}`` (each output's text; media is left out)."""
    if not resume.external_results:
        return [data_part({"confirmed": True})]
    results = [
        {
            "call_id": r.call_id,
            "output": r.output if isinstance(r.output, str) else output_text(r.output),
            "state": r.state,
        }
        for r in resume.external_results
    ]
    return [data_part({"external_results": results})]


async def run_remote(
    agent: AgentView,
    call: ToolCall,
    handoff: RemoteHandoff,
    parts: list[a2a_pb2.Part],
    outcome: ForkOutcome,
    *,
    task: dict[str, Any] | None = None,
    message_id: str = "",
) -> AsyncIterator[AgentEvent]:
    """One task step of the remote receiver for `call` (continuing the paused `task`, its
    ``task_id`` and ``context_id``, when given): its events nested under the call, then
    `outcome` filled in as a local receiver's is (a paused one's `saved` is the task). It
    takes its share of the reply's propagated limits, and is charged what it reports. The
    receiver's client must be open (`HandoffMiddleware` opens it)."""
    remote = handoff.remote
    share = remote_share(agent, call.id)
    metadata = {LIMITS_METADATA_KEY: limits_json(share.limits)} if share else None
    step = EventSource(call_id=call.id, tool_name=call.name, agent_name=handoff.name)
    got = TaskOutcome()
    try:
        async for event in remote.run(
            parts,
            got,
            context_id=task["context_id"] if task else "",
            task_id=task["task_id"] if task else "",
            message_id=message_id if task is None else "",
            metadata=metadata,
        ):
            if not step.run_id and got.task_id:
                step = step.model_copy(update={"run_id": got.task_id})
            yield nest(event, step, agent.reply_id)
    except TimeoutError:
        outcome.text = f"Error: the remote agent {handoff.name} did not finish within "
        outcome.text += f"{handoff.timeout} s"
        return
    except _CALL_FAILURES as exc:
        outcome.text = f"Error: the remote agent {handoff.name} failed: {exc}"
        return
    finally:
        if share is not None:
            share.pool.settle(got.spent)
    _fill(handoff, got, outcome)


def _fill(handoff: RemoteHandoff, got: TaskOutcome, outcome: ForkOutcome) -> None:
    said = output_text(got.output)
    if got.state == "completed":
        outcome.text, outcome.ok = said, True
        return
    data = got.status_data[0] if got.status_data else {}
    awaiting, asks = _asks(data) if got.state == "input_required" else ("", [])
    if asks:
        outcome.paused, outcome.asks = True, asks
        outcome.awaiting = "external" if awaiting == "external_execution" else "confirmation"
        outcome.saved = {"task_id": got.task_id, "context_id": got.context_id}
        return
    ended = got.state or "an unfinished stream"
    if got.state == "input_required":
        ended = "a question (only confirmations and external calls are passed up)"
    outcome.text = f"Error: the remote agent {handoff.name} ended with {ended}" + (
        f": {said}" if said else ""
    )


def _asks(data: Any) -> tuple[str, list[ToolCall]]:
    """What a paused hookmesh agent waits for and the calls it waits on (its input-required
    data part ``{"awaiting": "confirmation" | "external_execution", "tool_calls": [{"id",
    "name", "arguments"}]}``); no calls for any other input-required task."""
    awaiting = data.get("awaiting") if isinstance(data, dict) else None
    if awaiting not in ("confirmation", "external_execution"):
        return "", []
    calls: Sequence[Any] = data.get("tool_calls") or []
    out = []
    for c in calls:
        if isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str):
            arguments = c.get("arguments", {})
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            out.append(ToolCall(id=c["id"], name=c["name"], arguments=text))
    return str(awaiting), out


__all__ = ["HISTORY_PREFIX", "RemoteHandoff"]
