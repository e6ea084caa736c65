"""Call limits: caps on model calls and tool calls per reply and per session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from hookmesh.middleware import (
    AgentView,
    ModelCallArgs,
    ModelCallNext,
    PermissionArgs,
    PermissionNext,
)
from hookmesh.middleware._base import (
    Middleware,
    PermissionDecision,
)
from hookmesh.models import ModelResponse, ModelResult
from hookmesh.schema import (
    CustomEvent,
    HintBlockEvent,
    is_assistant,
    make_assistant,
    make_hint,
    tool_results,
)

if TYPE_CHECKING:
    pass

OnLimit = Literal["final_answer", "end"]
"""What reaching a limit does: force one last tool-less answer, or end with the reason."""

CALL_LIMIT_EVENT = "hookmesh.call_limit"
"""Name of the custom event sent when a limit acts:
``{"limit": "model_calls_per_reply", "max": 5, "action": "final_answer"|"end"|"deny",
"tool": name (tool limits only)}``."""
ANY_TOOL = "*"
"""Key of a tool limit counting the calls of every tool together."""
STOP_REASON = "call_limit"
"""stop_reason of the answer that ends a reply at a limit (no model was called)."""

DEFAULT_HINT = (
    "You have reached the limit of calls for this conversation. Do not call any more tools: "
    "give your final answer now with what you have."
)
DEFAULT_END = "I stopped here: {reason}."
"""The final answer when a limit ends the reply; ``{reason}`` is which limit."""

_RAN = ("success", "error")


def _limit(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, not {value!r}")
    return value


def _tool_limits(name: str, value: Mapping[str, int] | None) -> dict[str, int]:
    out = {}
    for tool, limit in (value or {}).items():
        checked = _limit(f"{name}[{tool!r}]", limit)
        if checked is None:
            raise ValueError(f"{name}[{tool!r}] must be an int >= 1")
        out[tool] = checked
    return out


class CallLimitMiddleware(Middleware):
    """Caps how many model calls and tool calls a reply and a session may make.

    Model calls: the last call a limit allows is forced to answer (``on_limit=
    "final_answer"``: ``tool_choice="none"`` and a hint) or runs as usual (``"end"``); a call
    beyond a limit is not made: the step answers with `DEFAULT_END` naming the limit
    (stop_reason ``call_limit``), so the reply ends cleanly, ``completed``. Tool calls, per
    tool name (`ANY_TOOL` counts every tool): a call beyond its limit is denied with the
    reason (the model reads it), and the next model call then gives the final answer, or,
    with ``"end"``, is replaced by the reason. Each action emits a `CALL_LIMIT_EVENT`.

    Per session counts are read from the conversation when a reply first needs them (its
    assistant messages, its tool results that ran) and go on in the reply's state, so a
    restart or another replica counts the same. A compression that drops old messages
    lowers the session counts.

    State: ``{"model_calls": n, "tool_calls": {name: n}, "base": {...}, "stop": reason}`` in
    ``middle_context["call_limits"][reply_id]``. Remote: declares `needs_context`.

    Example:
        >>> mw = CallLimitMiddleware(model_calls_per_reply=8, tool_calls_per_reply={"search": 3})
        >>> mw.on_limit
        'final_answer'

    Args:
        model_calls_per_reply: Most model calls in one reply; None: no limit.
        model_calls_per_session: Most model calls in the session; None: no limit.
        tool_calls_per_reply: Most calls per tool name (or `ANY_TOOL`) in one reply.
        tool_calls_per_session: Most calls per tool name (or `ANY_TOOL`) in the session.
        on_limit: ``final_answer`` or ``end``.
        hint: The hint of the forced final answer.
        end_message: The answer that ends a reply at a limit (``{reason}`` is filled in).
    """

    needs_context = True

    def __init__(
        self,
        *,
        model_calls_per_reply: int | None = None,
        model_calls_per_session: int | None = None,
        tool_calls_per_reply: Mapping[str, int] | None = None,
        tool_calls_per_session: Mapping[str, int] | None = None,
        on_limit: OnLimit = "final_answer",
        hint: str = DEFAULT_HINT,
        end_message: str = DEFAULT_END,
    ) -> None:
        self.model_calls_per_reply = _limit("model_calls_per_reply", model_calls_per_reply)
        self.model_calls_per_session = _limit("model_calls_per_session", model_calls_per_session)
        self.tool_calls_per_reply = _tool_limits("tool_calls_per_reply", tool_calls_per_reply)
        self.tool_calls_per_session = _tool_limits("tool_calls_per_session", tool_calls_per_session)
        if on_limit not in ("final_answer", "end"):
            raise ValueError(f"on_limit must be 'final_answer' or 'end', not {on_limit!r}")
        if not hint.strip():
            raise ValueError("hint must not be empty")
        if "{reason}" not in end_message:
            raise ValueError("end_message must contain {reason}")
        self.on_limit: OnLimit = on_limit
        self.hint = hint
        self.end_message = end_message

    def middleware_key(self) -> str:
        return "call_limits"

    def _base(self, agent: AgentView, state: dict[str, Any]) -> dict[str, Any]:
        """Calls the session made before this reply, counted once per reply."""
        base = state.get("base")
        if base is None:
            context = agent.state.context
            tools: dict[str, int] = {}
            for msg in context:
                for result in tool_results(msg):
                    if result.state in _RAN:
                        tools[result.name] = tools.get(result.name, 0) + 1
                        tools[ANY_TOOL] = tools.get(ANY_TOOL, 0) + 1
            base = state["base"] = {
                "model": sum(1 for m in context if is_assistant(m)),
                "tools": tools,
            }
        return base  # type: ignore[no-any-return]

    def _emit(self, agent: AgentView, limit: str, most: int, action: str, tool: str = "") -> None:
        value: dict[str, Any] = {"limit": limit, "max": most, "action": action}
        if tool:
            value["tool"] = tool
        agent.emit(CustomEvent(reply_id=agent.reply_id, name=CALL_LIMIT_EVENT, value=value))

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        """Deny a call beyond its tool's limit (and remember that the reply must finish).

        Runs before the call, outside its execution; calls are counted when allowed here.
        """
        name = kwargs["tool_call"].name
        state = self.state(agent)
        made: dict[str, int] = state.setdefault("tool_calls", {})
        base = self._base(agent, state)["tools"] if self.tool_calls_per_session else {}
        for key in (name, ANY_TOOL):
            for scope, limits, before in (
                ("reply", self.tool_calls_per_reply, 0),
                ("session", self.tool_calls_per_session, base.get(key, 0)),
            ):
                most = limits.get(key)
                if most is not None and before + made.get(key, 0) >= most:
                    label = "every tool" if key == ANY_TOOL else key
                    reason = f"the limit of {most} calls per {scope} of {label} is reached"
                    state["stop"] = reason
                    self._emit(agent, f"tool_calls_per_{scope}", most, "deny", key)
                    return PermissionDecision("deny", reason)
        decision = await next_handler()
        if decision.behavior != "deny":
            # Re-read: in a sidecar the downstream's outcome brings the state back anew.
            made = self.state(agent).setdefault("tool_calls", {})
            made[name] = made.get(name, 0) + 1
            made[ANY_TOOL] = made.get(ANY_TOOL, 0) + 1
        return decision

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Count the call; force the last allowed one to answer, replace one over a limit.

        Wraps the model call (inside the reasoning step); the hint is added to this call's
        prompt only, never to the context.
        """
        state = self.state(agent)
        made = state.get("model_calls", 0)
        over: tuple[str, int] | None = None
        last: tuple[str, int] | None = None
        for scope, most, before in (
            ("reply", self.model_calls_per_reply, 0),
            ("session", self.model_calls_per_session, None),
        ):
            if most is None:
                continue
            count = made + (self._base(agent, state)["model"] if before is None else 0)
            if count >= most:
                over = (f"model_calls_per_{scope}", most)
            elif count + 1 >= most:
                last = (f"model_calls_per_{scope}", most)
        stop = state.get("stop")
        if over is not None or (stop and self.on_limit == "end"):
            if over is not None:
                label, most = over
                stop = f"the limit of {most} model calls per {label.rsplit('_', 1)[1]} is reached"
                self._emit(agent, label, most, "end")
            text = self.end_message.format(reason=stop)
            return ModelResponse(make_assistant(agent.kind, text), stop_reason=STOP_REASON)
        state["model_calls"] = made + 1
        if self.on_limit == "final_answer" and (stop or last is not None):
            if last is not None:
                self._emit(agent, last[0], last[1], "final_answer")
            return await self._final_answer(agent, kwargs, next_handler)
        return await next_handler()

    async def _final_answer(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        hint_id = f"{agent.reply_id}-call-limit"
        hint = make_hint(agent.kind, self.hint, self.middleware_key(), id=hint_id)
        agent.emit(
            HintBlockEvent(
                reply_id=agent.reply_id,
                block_id=hint_id,
                text=self.hint,
                source=self.middleware_key(),
            )
        )
        return await next_handler(tool_choice="none", messages=[*kwargs["messages"], hint])
