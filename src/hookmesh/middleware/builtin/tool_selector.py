"""Model-based tool selection: with many tools attached, a (small) model picks the relevant
ones before each main model call."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import Middleware
from hookmesh.models import ChatModel, ModelResponse, ModelResult
from hookmesh.schema import (
    CustomEvent,
    Message,
    MessageKind,
    ToolCall,
    is_user,
    make_assistant,
    make_text,
    make_user_text,
    text_of,
    tool_calls,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger("hookmesh.middleware.tool_selector")

SELECTION_EVENT = "hookmesh.tool_selection"
"""Name of the custom event sent for each selection: ``{"selected": [names], "from": n}``,
plus ``"error"`` when the selector failed and every tool was kept."""
SELECT_TOOL = "select_tools"
"""The function the selector model is asked to call (``{"names": [...]}``)."""

DEFAULT_INSTRUCTION = (
    "You choose the tools an assistant needs for the user's latest request. Call "
    f"{SELECT_TOOL} with the names of the most relevant tools, at most {{max_tools}}, most "
    "relevant first. Tools:\n{tools}"
)

_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


class ToolSelectionError(ValueError):
    """The selector's answer names no tool the agent has."""


class ToolSelectorMiddleware(Middleware):
    """Offers the main model only the tools relevant to the request when many are attached.

    Before each model call with more than `threshold` tools, the selector model (`model`,
    or the agent's own in process) gets the tool names and descriptions and the latest user
    request, and calls `SELECT_TOOL` (or answers with a JSON list or a comma-separated
    list of names). The call then goes on with at most `max_tools` of them, plus every tool
    in `always_include` and a tool the call's ``tool_choice`` names. If the selector fails
    (an error, or no known name), every tool is kept and the reply goes on. Each selection
    emits a `SELECTION_EVENT`. The request is the last user message with text of its own;
    while it and the tools stay the same (the later steps of a reply), the choice is reused.

    State: the last request, tools and choice (per reply). Remote: declares `needs_context`
    (it reads the request) and narrows the offered tools with ``ModelCallOverrides.tools``; a
    sidecar needs `model` (it has none of the agent's).

    Example:
        >>> from hookmesh.models import ScriptedChatModel
        >>> mw = ToolSelectorMiddleware(ScriptedChatModel(["search"]), always_include=["help"])
        >>> (mw.threshold, mw.max_tools)
        (10, 5)

    Args:
        model: The selecting model; None uses the agent's model.
        threshold: Select only when more tools than this are attached.
        max_tools: Most tools the selector may pick (always-included ones come on top).
        always_include: Tool names always offered.
        instruction: The selector's system instruction (``{tools}`` and ``{max_tools}`` are
            filled in).
    """

    needs_context = True

    def __init__(
        self,
        model: ChatModel | None = None,
        *,
        threshold: int = 10,
        max_tools: int = 5,
        always_include: Collection[str] = (),
        instruction: str = DEFAULT_INSTRUCTION,
    ) -> None:
        if model is not None and not isinstance(model, ChatModel):
            raise ValueError(f"model must be a ChatModel or None, not {type(model).__name__}")
        for name, value in (("threshold", threshold), ("max_tools", max_tools)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, not {value!r}")
        if "{tools}" not in instruction:
            raise ValueError("instruction must contain {tools}")
        self.model = model
        self.threshold = threshold
        self.max_tools = max_tools
        self.always_include = frozenset(always_include)
        self.instruction = instruction

    def middleware_key(self) -> str:
        return "tool_selector"

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Ask the selector, then call the model with the chosen tools only.

        Wraps the model call; the selector's own call does not go through the model-call
        chain. A selector failure is logged and reported, never fatal.
        """
        tools: list[dict[str, Any]] = kwargs["tools"]
        if len(tools) <= self.threshold:
            return await next_handler()
        names = [t["name"] for t in tools]
        # The request: the last user message with text of its own (an agentic tool result
        # is a user message too, a flat one is not: skip those, both kinds alike).
        request = next(
            (t for m in reversed(kwargs["messages"]) if is_user(m) and (t := text_of(m))), ""
        )
        state = self.state(agent)
        asked = [request, names]
        try:
            if state.get("asked") == asked:
                # Same request, same tools (the next step of the reply): same choice.
                chosen = state["chosen"]
            else:
                chosen = await self._select(agent, tools, request)
                state.update(asked=asked, chosen=chosen)
        except Exception as exc:
            log.warning("tool selection failed, offering every tool: %s", exc)
            self._report(agent, names, len(tools), error=f"{type(exc).__name__}: {exc}")
            return await next_handler()
        keep = set(chosen) | self.always_include | {kwargs["tool_choice"]}
        subset = [t for t in tools if t["name"] in keep]
        self._report(agent, [t["name"] for t in subset], len(tools))
        return await next_handler(tools=subset)

    async def _select(
        self, agent: AgentView, tools: list[dict[str, Any]], request: str
    ) -> list[str]:
        model = self.model or agent.model
        if model is None:
            raise ToolSelectionError("no selector model: pass model= (a sidecar has none)")
        known = {t["name"] for t in tools}
        listing = "\n".join(f"- {t['name']}: {t.get('description', '')}" for t in tools)
        system = self.instruction.format(tools=listing, max_tools=self.max_tools)
        prompt = [make_text(agent.kind, "system", system), make_user_text(agent.kind, request)]
        result = await model(
            prompt, tools=[_select_tool(sorted(known))], tool_choice=SELECT_TOOL, kind=agent.kind
        )
        chosen = [n for n in _names(await _message(result, agent.kind)) if n in known]
        if not chosen:
            raise ToolSelectionError("the selector named no known tool")
        return list(dict.fromkeys(chosen))[: self.max_tools]

    def _report(self, agent: AgentView, selected: list[str], total: int, error: str = "") -> None:
        value: dict[str, Any] = {"selected": selected, "from": total}
        if error:
            value["error"] = error
        agent.emit(CustomEvent(reply_id=agent.reply_id, name=SELECTION_EVENT, value=value))


def _select_tool(names: list[str]) -> dict[str, Any]:
    return {
        "name": SELECT_TOOL,
        "description": "Choose the tools the assistant needs.",
        "parameters": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string", "enum": names}}},
            "required": ["names"],
        },
    }


async def _message(result: ModelResult, kind: MessageKind) -> Message:
    if isinstance(result, ModelResponse):
        return result.message
    text: list[str] = []
    args: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    async for chunk in result:
        text.append(chunk.text)
        if chunk.tool_call is not None:
            names.setdefault(chunk.tool_call.call_id, chunk.tool_call.name)
            args.setdefault(chunk.tool_call.call_id, []).append(chunk.tool_call.arguments)
    calls = [ToolCall(id=i, name=names[i], arguments="".join(a)) for i, a in args.items()]
    return make_assistant(kind, "".join(text), calls)


def _names(message: Message) -> list[str]:
    """Tool names from a select_tools call, else from a JSON list or a plain list in text."""
    for call in tool_calls(message):
        if call.name == SELECT_TOOL:
            try:
                value = json.loads(call.arguments or "{}").get("names", [])
            except (json.JSONDecodeError, AttributeError):
                continue
            return [str(v) for v in value] if isinstance(value, list) else []
    text = text_of(message).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return _NAME.findall(text)
    return [str(v) for v in value] if isinstance(value, list) else []
