"""Remote agents: each configured A2A agent as a tool; its progress streams as nested events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import httpx
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2

from hookmesh.a2a import LIMITS_METADATA_KEY, data_part, limits_json
from hookmesh.agent import new_id
from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._tool_io import Lifecycle, output_text
from hookmesh.middleware.builtin.propagated_limits import remote_share
from hookmesh.middleware.builtin.remote_agent._a2a import (
    STATUS_EVENT,
    RemoteAgent,
    RemoteAgentConfig,
    TaskOutcome,
    context_for,
)
from hookmesh.models import ModelResponse
from hookmesh.schema import (
    EventSource,
    TextBlock,
    ToolCall,
    ToolOutputBlock,
    ask_path,
    make_assistant,
    nest,
    tool_results,
)
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, external_tool

if TYPE_CHECKING:
    from hookmesh.models import ModelResult

log = logging.getLogger("hookmesh.middleware.remote_agent")

INPUT_SUFFIX = "__input"
"""Suffix of the external tool through which a remote agent's question reaches the user."""
CONFIRM_SUFFIX = "__confirm"
"""Suffix of the tool (needing confirmation) through which a remote agent's wish to run calls
the user must confirm reaches the user as this reply's own confirmation."""
_PARAMETERS = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to ask or tell the agent."}},
    "required": ["message"],
}
_CALL_FAILURES = (A2AClientError, httpx.HTTPError, grpc.RpcError, OSError)


class RemoteAgentUnavailableError(HookmeshError):
    """A fail_closed remote agent middleware cannot read an agent's card."""

    reason = "REMOTE_AGENT_UNAVAILABLE"


class RemoteAgentMiddleware(Lifecycle, Middleware):
    """Lets the agent delegate to other agents over A2A (the official ``a2a-sdk``; A2A 1.0 on
    JSON-RPC, HTTP+JSON or gRPC): one tool per configured agent, ``<name>(message)``,
    described from the agent's card.

    Calling it sends the message as a task (later calls in the same session continue the
    remote context, so the remote agent remembers the conversation), streams the remote
    reply's progress as nested events under the call (the hookmesh events a hookmesh agent
    sends in its status updates; a ``a2a.status`` custom event for another agent's status
    text), and returns the task's artifacts as the result (text, files; data parts as JSON
    text). A failed, rejected or canceled task is an error result.

    When a hookmesh remote agent waits for the user to confirm calls, this reply pauses as
    for a call of its own: the next model call is replaced by a call of ``<name>__confirm``
    (hidden from the model, needing confirmation; arguments: the remote calls and ``path``,
    the agents down to the one that asks), so the reply ends ``awaiting_confirmation``.
    Approving it sends ``{"confirmed": true}`` to the remote task and the call's result is
    the remote agent's; rejecting it sends the denial's text as the answer.

    When the remote task needs other input (``input-required``), this reply pauses for the
    user: the next model call is replaced by a call to the external tool ``<name>__input``
    (arguments: the remote agent's question and what it waits for), so the reply ends
    ``awaiting_external_execution``. Resume it with the user's answer as that call's result;
    the answer is then sent to the same remote task (a replaced model call again) and the
    reply goes on with the remote agent's final result. The ``__input`` tools are hidden from
    the model.

    Hooks: `on_model_call` (the pause and its answer; otherwise it only hides the
    ``__input`` tools); each tool's run does the task step itself (with the run context), so
    other tool calls never reach this middleware. State: the waiting remote task, in
    ``middle_context["remote_agent"][reply_id]``, so it survives the pause (also in another
    process). Through a sidecar the tools run over ``CallTool`` and the nested events stream
    as they happen, but a remote ``input-required`` does not pause the reply (the remote
    protocol does not mark a tool external): the result tells the model what the remote
    agent asks.

    Example:
        >>> mw = RemoteAgentMiddleware([{"name": "weather", "url": "http://127.0.0.1:7020"}])
        >>> [a.config.name for a in mw.agents]
        ['weather']

    Args:
        agents: `RemoteAgentConfig`s or mappings of their fields (unique names).
        failure_mode: ``fail_closed`` (default: `start` fails when a card cannot be read) or
            ``fail_open`` (that agent's tool is left out).
    """

    def __init__(
        self,
        agents: Sequence[RemoteAgentConfig | Mapping[str, Any]],
        *,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        configs = [
            a if isinstance(a, RemoteAgentConfig) else RemoteAgentConfig.model_validate(a)
            for a in agents
        ]
        names = [c.name for c in configs]
        if not names or len(set(names)) != len(names):
            raise ValueError("agents must be at least one agent, with unique names")
        self.agents = [RemoteAgent(c) for c in configs]
        self.failure_mode = check.failure(failure_mode)
        self._by_name: dict[str, RemoteAgent] = {}
        self._tools: list[Tool] = []
        self._hidden = frozenset(
            f"{n}{suffix}" for n in names for suffix in (INPUT_SUFFIX, CONFIRM_SUFFIX)
        )

    def middleware_key(self) -> str:
        return "remote_agent"

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Read every agent's card (concurrently) and make its client.

        Raises:
            RemoteAgentUnavailableError: fail_closed, and a card could not be read.
        """
        results = await asyncio.gather(*(a.open() for a in self.agents), return_exceptions=True)
        for remote, result in zip(self.agents, results, strict=True):
            if isinstance(result, BaseException):
                name = remote.config.name
                if self.failure_mode == "fail_closed":
                    await self.aclose()
                    raise RemoteAgentUnavailableError(
                        f"cannot read the card of remote agent {name}: {result}",
                        metadata={"agent": name},
                    )
                log.warning("remote agent %s is left out: %s", name, result)
                continue
            self._by_name[remote.config.name] = remote
            self._tools.append(self._tool(remote))
            self._tools.append(
                external_tool(
                    f"{remote.config.name}{INPUT_SUFFIX}",
                    f"The user's answer to a question of the remote agent {remote.config.name}.",
                    {"type": "object", "properties": {"question": {"type": "string"}}},
                )
            )
            self._tools.append(self._confirm_tool(remote))

    async def aclose(self) -> None:
        """Close every client."""
        await asyncio.gather(*(a.close() for a in self.agents), return_exceptions=True)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _tool(self, remote: RemoteAgent) -> Tool:
        async def ask(
            context: ToolContext[AgentView], message: str, **unused_extra: Any
        ) -> AsyncIterator[ToolPiece]:
            async for piece in self._ask(context, remote, message):
                yield piece

        return Tool(
            name=remote.config.name,
            description=remote.description(),
            parameters=_PARAMETERS,
            func=ask,
        )

    def _confirm_tool(self, remote: RemoteAgent) -> Tool:
        async def confirm(
            context: ToolContext[AgentView], **unused_arguments: Any
        ) -> AsyncIterator[ToolPiece]:
            async for piece in self._confirmed(context, remote):
                yield piece

        name = remote.config.name
        return Tool(
            name=f"{name}{CONFIRM_SUFFIX}",
            description=f"The user confirms the calls the remote agent {name} asks to make.",
            parameters={
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "path": {"type": "array", "items": {"type": "string"}},
                    "tool_calls": {"type": "array"},
                },
            },
            func=confirm,
            needs_confirmation=True,
        )

    async def _confirmed(
        self, context: ToolContext[AgentView], remote: RemoteAgent
    ) -> AsyncIterator[ToolPiece]:
        """The user approved the remote agent's calls: tell its task, and go on with it."""
        state = self.state(context.agent)
        waiting = state.pop("waiting", None)
        state.pop("asked", None)
        if waiting is None:
            raise ToolError("Error: the remote agent waits for no confirmation")
        state.setdefault("continue", {})[context.call.id] = {
            "task_id": waiting["task_id"],
            "context_id": waiting["context_id"],
        }
        async for piece in self._ask(context, remote, "", data_part({"confirmed": True})):
            yield piece

    # --- hooks -----------------------------------------------------------------------------

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Replace the model call while a remote agent waits for the user: first with a call
        of ``<name>__input`` (the reply pauses), then, once answered, with a call sending the
        answer to the remote task. Otherwise hide the ``__input`` tools and call the model.

        Boundary: wraps one model call; the replacing answers are tool calls only.
        """
        state = self.state(agent)
        waiting = state.get("waiting")
        pause = _pause_tool(agent, waiting) if waiting is not None else None
        if waiting is not None and pause is not None:
            if "asked" not in state:
                arguments = {"question": waiting["question"], **waiting["data"]}
                if pause.endswith(CONFIRM_SUFFIX):
                    arguments["path"] = _path(waiting)
                call = ToolCall(id=new_id(), name=pause, arguments=json.dumps(arguments))
                state["asked"] = call.id
                return ModelResponse(message=make_assistant(agent.kind, "", [call]))
            answer = _answer_text(kwargs["messages"], state["asked"])
            if answer is not None:
                call = ToolCall(
                    id=new_id(), name=waiting["agent"], arguments=json.dumps({"message": answer})
                )
                state.setdefault("continue", {})[call.id] = {
                    "task_id": waiting["task_id"],
                    "context_id": waiting["context_id"],
                }
                del state["waiting"], state["asked"]
                return ModelResponse(message=make_assistant(agent.kind, "", [call]))
        return await next_handler(
            tools=[t for t in kwargs["tools"] if t["name"] not in self._hidden]
        )

    async def _ask(
        self,
        context: ToolContext[AgentView],
        remote: RemoteAgent,
        message: str,
        part: a2a_pb2.Part | None = None,
    ) -> AsyncIterator[ToolPiece]:
        """One task step of `remote` for this call: its progress as nested events, then its
        result (an error result when it failed); a task waiting for the user is kept in the
        reply's state, for `on_model_call` to pause on."""
        agent, call = context.agent, context.call
        state = self.state(agent)
        resumed = state.get("continue", {}).pop(call.id, None)
        outcome = TaskOutcome()
        # A reply under propagated limits lends the remote agent its share (the limits
        # extension) and is charged what the agent reports it spent.
        share = remote_share(agent, call.id)
        metadata = {LIMITS_METADATA_KEY: limits_json(share.limits)} if share else None
        try:
            context_id = (
                resumed["context_id"] if resumed else context_for(agent.session_id, call.name)
            )
            step = EventSource(call_id=call.id, tool_name=call.name, agent_name=_agent_name(remote))
            async for event in remote.run(
                [part if part is not None else a2a_pb2.Part(text=message)],
                outcome,
                context_id=context_id,
                task_id=resumed["task_id"] if resumed else "",
                # NOTE(durability): the same message id on every run of this call, so the
                # remote agent can tell a repeat from a new request.
                message_id=context.idempotency_key if not resumed else "",
                metadata=metadata,
            ):
                if not step.run_id and outcome.task_id:
                    step = step.model_copy(update={"run_id": outcome.task_id})
                yield nest(event, step, agent.reply_id)
            output, ok = _result(remote, outcome)
        except TimeoutError:
            text = (
                f"Error: remote agent {call.name} did not finish within {remote.config.timeout} s"
            )
            output, ok = [TextBlock(text=text)], False
        except _CALL_FAILURES as exc:
            output, ok = [TextBlock(text=f"Error: remote agent {call.name} failed: {exc}")], False
        finally:
            if share is not None:
                share.pool.settle(outcome.spent)
        if outcome.state == "input_required":
            data = outcome.status_data[0] if outcome.status_data else {}
            state["waiting"] = {
                "agent": call.name,
                "agent_name": _agent_name(remote),
                "task_id": outcome.task_id,
                "context_id": outcome.context_id,
                "question": output_text(output),
                "data": data if isinstance(data, dict) else {"data": data},
            }
        if not ok:
            raise ToolError(output)
        for block in output:
            yield block


def _pause_tool(agent: AgentView, waiting: dict[str, Any]) -> str | None:
    """The tool through which this reply pauses for what the remote task waits for: its
    ``__confirm`` tool for a hookmesh agent's confirmation, else its ``__input`` tool; None
    when the agent cannot pause (in a sidecar)."""
    toolkit = getattr(agent, "toolkit", None)
    confirm = f"{waiting['agent']}{CONFIRM_SUFFIX}"
    asks = waiting["data"].get("awaiting") == "confirmation"
    if asks and toolkit is not None and toolkit.get(confirm) is not None:
        return confirm
    tool = f"{waiting['agent']}{INPUT_SUFFIX}"
    return tool if _can_pause(agent, tool) else None


def _path(waiting: dict[str, Any]) -> list[str]:
    """The agents from the remote one down to the one that asks: a remote agent that is
    itself waiting on a sub-agent's confirmation names the rest in its one call's path."""
    path = [str(waiting.get("agent_name") or waiting["agent"])]
    calls = waiting["data"].get("tool_calls") or []
    if len(calls) == 1 and isinstance(calls[0], dict):
        path += ask_path(str(calls[0].get("name", "")), calls[0].get("arguments"))
    return path


def _can_pause(agent: AgentView, input_tool: str) -> bool:
    """Whether the agent knows `input_tool` as an external tool, so calling it pauses the
    reply (in process; the remote protocol does not carry the external flag)."""
    toolkit = getattr(agent, "toolkit", None)
    tool = toolkit.get(input_tool) if toolkit is not None else None
    return tool is not None and tool.external


def _agent_name(remote: RemoteAgent) -> str:
    return remote.card.name if remote.card is not None else remote.config.name


def _result(remote: RemoteAgent, outcome: TaskOutcome) -> tuple[list[ToolOutputBlock], bool]:
    """The tool's output for how the task step ended, and whether it succeeded."""
    name = remote.config.name
    if outcome.state == "completed":
        return outcome.output or [TextBlock(text="")], True
    if outcome.state == "input_required":
        question = output_text(outcome.output) or "it needs more input"
        return [TextBlock(text=f"The remote agent {name} asks the user: {question}")], True
    why = output_text(outcome.output)
    ended = outcome.state or "an unfinished stream"
    text = f"Error: the remote agent {name} ended with {ended}" + (f": {why}" if why else "")
    return [TextBlock(text=text)], False


def _answer_text(messages: Sequence[Any], call_id: str) -> str | None:
    """The text of the result answering `call_id`, if the conversation has it."""
    for message in reversed(messages):
        for result in tool_results(message):
            if result.call_id == call_id:
                return result.text
    return None


__all__ = [
    "CONFIRM_SUFFIX",
    "INPUT_SUFFIX",
    "STATUS_EVENT",
    "RemoteAgentConfig",
    "RemoteAgentMiddleware",
    "RemoteAgentUnavailableError",
]
