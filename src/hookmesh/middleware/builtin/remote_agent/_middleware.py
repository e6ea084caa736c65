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

from hookmesh.agent import new_id
from hookmesh.errors import HookmeshError
from hookmesh.middleware import ActingArgs, ActingNext, AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._tool_io import Lifecycle, output_events, output_text
from hookmesh.middleware.builtin.remote_agent._a2a import (
    STATUS_EVENT,
    RemoteAgent,
    RemoteAgentConfig,
    TaskOutcome,
    context_for,
)
from hookmesh.models import ModelResponse
from hookmesh.schema import (
    AgentEvent,
    EventSource,
    TextBlock,
    ToolCall,
    ToolOutputBlock,
    ToolResultStartEvent,
    make_assistant,
    nest,
    tool_results,
)
from hookmesh.tools import Tool, ToolArgumentError, external_tool

if TYPE_CHECKING:
    from hookmesh.models import ModelResult

log = logging.getLogger("hookmesh.middleware.remote_agent")

INPUT_SUFFIX = "__input"
"""Suffix of the external tool through which a remote agent's question reaches the user."""
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

    When the remote task needs input (``input-required``), this reply pauses for the user:
    the next model call is replaced by a call to the external tool ``<name>__input``
    (arguments: the remote agent's question and what it waits for), so the reply ends
    ``awaiting_external_execution``. Resume it with the user's answer as that call's result;
    the answer is then sent to the same remote task (a replaced model call again) and the
    reply goes on with the remote agent's final result. The ``__input`` tools are hidden from
    the model.

    Hooks: `on_acting` (its tools), `on_model_call` (the pause and its answer; otherwise it
    only hides the ``__input`` tools). State: the waiting remote task, in
    ``middle_context["remote_agent"][reply_id]``, so it survives the pause (also in another
    process). Through a sidecar, nested events arrive when the call ends, and a remote
    ``input-required`` does not pause the reply (the remote protocol does not mark a tool
    external): the result tells the model what the remote agent asks.

    Example:
        >>> mw = RemoteAgentMiddleware([{"name": "weather", "url": "http://127.0.0.1:7020"}])
        >>> [a.config.name for a in mw.agents]
        ['weather']

    Args:
        agents: `RemoteAgentConfig`s or mappings of their fields (unique names).
        failure_mode: ``fail_closed`` (default: `start` fails when a card cannot be read) or
            ``fail_open`` (that agent's tool is left out).
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_acting": ()}

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
        self._hidden = frozenset(f"{n}{INPUT_SUFFIX}" for n in names)

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

    async def aclose(self) -> None:
        """Close every client."""
        await asyncio.gather(*(a.close() for a in self.agents), return_exceptions=True)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _tool(self, remote: RemoteAgent) -> Tool:
        async def ask(message: str) -> list[ToolOutputBlock]:
            outcome = TaskOutcome()
            async for _ in remote.run([a2a_pb2.Part(text=message)], outcome):
                pass
            return _result(remote, outcome)[0]

        return Tool(
            name=remote.config.name,
            description=remote.description(),
            parameters=_PARAMETERS,
            func=ask,
        )

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
        if waiting is not None and _can_pause(agent, f"{waiting['agent']}{INPUT_SUFFIX}"):
            if "asked" not in state:
                call = ToolCall(
                    id=new_id(),
                    name=f"{waiting['agent']}{INPUT_SUFFIX}",
                    arguments=json.dumps({"question": waiting["question"], **waiting["data"]}),
                )
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

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Run a remote agent's task for calls of its tool; pass every other call through.

        Boundary: wraps one tool's execution; a remote failure is an error result.
        """
        call: ToolCall = kwargs["tool_call"]
        remote = self._by_name.get(call.name)
        if remote is None:
            return next_handler()  # costs nothing per event of other tools
        return self._run_call(agent, kwargs, call, remote)

    async def _run_call(
        self, agent: AgentView, kwargs: ActingArgs, call: ToolCall, remote: Any
    ) -> AsyncIterator[AgentEvent]:
        reply_id = agent.reply_id
        yield ToolResultStartEvent(reply_id=reply_id, call_id=call.id, name=call.name)
        state = self.state(agent)
        resumed = state.get("continue", {}).pop(call.id, None)
        outcome = TaskOutcome()
        try:
            message = _message(kwargs.get("arguments"), call)
            context_id = (
                resumed["context_id"]
                if resumed
                else context_for(getattr(agent, "session_id", ""), call.name)
            )
            step = EventSource(call_id=call.id, tool_name=call.name, agent_name=_agent_name(remote))
            async for event in remote.run(
                [a2a_pb2.Part(text=message)],
                outcome,
                context_id=context_id,
                task_id=resumed["task_id"] if resumed else "",
            ):
                if not step.run_id and outcome.task_id:
                    step = step.model_copy(update={"run_id": outcome.task_id})
                yield nest(event, step, reply_id)
            output, ok = _result(remote, outcome)
        except ToolArgumentError as exc:
            output, ok = [TextBlock(text=f"Error: {exc}")], False
        except TimeoutError:
            text = (
                f"Error: remote agent {call.name} did not finish within {remote.config.timeout} s"
            )
            output, ok = [TextBlock(text=text)], False
        except _CALL_FAILURES as exc:
            output, ok = [TextBlock(text=f"Error: remote agent {call.name} failed: {exc}")], False
        if outcome.state == "input_required":
            data = outcome.status_data[0] if outcome.status_data else {}
            state["waiting"] = {
                "agent": call.name,
                "task_id": outcome.task_id,
                "context_id": outcome.context_id,
                "question": output_text(output),
                "data": data if isinstance(data, dict) else {"data": data},
            }
        for event in output_events(reply_id, call.id, output, ok):
            yield event


def _can_pause(agent: AgentView, input_tool: str) -> bool:
    """Whether the agent knows `input_tool` as an external tool, so calling it pauses the
    reply (in process; the remote protocol does not carry the external flag)."""
    toolkit = getattr(agent, "toolkit", None)
    tool = toolkit.get(input_tool) if toolkit is not None else None
    return tool is not None and tool.external


def _agent_name(remote: RemoteAgent) -> str:
    return remote.card.name if remote.card is not None else remote.config.name


def _message(arguments: dict[str, Any] | None, call: ToolCall) -> str:
    if arguments is None:  # in a sidecar only the call travels
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            raise ToolArgumentError("arguments are not valid JSON") from None
    message = arguments.get("message") if isinstance(arguments, dict) else None
    if not isinstance(message, str):
        raise ToolArgumentError("give the agent a `message` (a string)")
    return message


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
    "INPUT_SUFFIX",
    "STATUS_EVENT",
    "RemoteAgentConfig",
    "RemoteAgentMiddleware",
    "RemoteAgentUnavailableError",
]
