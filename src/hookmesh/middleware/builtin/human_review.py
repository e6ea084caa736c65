"""Human review: a per-tool allow / ask / deny policy; asked calls wait for a person."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hookmesh.middleware import AgentView, PermissionArgs, PermissionNext
from hookmesh.middleware._base import Middleware, PermissionDecision
from hookmesh.schema import CustomEvent

if TYPE_CHECKING:
    pass

ReviewDecision = Literal["allow", "ask", "deny"]
"""What a policy does with a call: run it, ask a person first, or refuse it."""

REVIEW_EVENT = "hookmesh.human_review"
"""Name of the custom event sent, before require_user_confirm, for each call asked about:
``{"call_id", "tool", "description"}``, so a client can tell the person why."""

_DECISIONS = ("allow", "ask", "deny")


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How calls of one tool are reviewed."""

    decision: ReviewDecision
    """``allow``, ``ask`` or ``deny``."""
    description: str = ""
    """Why: shown to the person for ``ask`` (in the `REVIEW_EVENT`), to the model for
    ``deny`` (in the denied result)."""


def _policy(name: str, value: Any) -> ToolPolicy:
    if isinstance(value, ToolPolicy):
        policy = value
    elif isinstance(value, str):
        policy = ToolPolicy(value)  # type: ignore[arg-type]
    elif isinstance(value, Mapping) and set(value) <= {"decision", "description"}:
        policy = ToolPolicy(value.get("decision", ""), str(value.get("description", "")))
    else:
        raise ValueError(
            f"policy for {name!r} must be allow|ask|deny, a ToolPolicy or "
            f"{{decision, description}}, not {value!r}"
        )
    if policy.decision not in _DECISIONS:
        raise ValueError(
            f"policy for {name!r}: decision must be allow, ask or deny, not {policy.decision!r}"
        )
    return policy


class HumanReviewMiddleware(Middleware):
    """Puts a person in front of the tools that need one.

    Each tool named in `policies` gets its decision: ``allow`` runs it (even a tool marked
    ``needs_confirmation``) unless an inner permission check denies it, ``deny`` answers the
    call with a denied result carrying the description, ``ask`` pauses the reply with
    require_user_confirm, preceded by a `REVIEW_EVENT` custom event with the description.
    Tools it does not name follow `default`, or, when that is None, the inner permission
    checks (the core asks for tools marked ``needs_confirmation``).

    The person's answer comes with `Agent.resume` (or the agent service's ``Resume``): approve
    the call, approve it with edited arguments (validated against the tool's schema; the
    context records the call as it ran), or reject it with a message the model reads.

    State: none (the decision depends only on the call). Works in a sidecar unchanged.

    Not supported: decisions that depend on the arguments (write an ``on_check_permission``
    of your own for that); asking about calls of an external tool twice (the person's
    approval is final, then the caller runs it).

    Example:
        >>> mw = HumanReviewMiddleware(
        ...     {"delete_file": {"decision": "ask", "description": "deletes user data"},
        ...      "search": "allow", "shell": "deny"},
        ... )
        >>> mw.policies["shell"].decision
        'deny'

    Args:
        policies: Per tool name: ``allow|ask|deny``, a `ToolPolicy`, or a mapping with
            ``decision`` and ``description`` (as in a YAML config).
        default: The decision for tools not named, or None to defer to the inner checks.
    """

    def __init__(
        self,
        policies: Mapping[str, ReviewDecision | ToolPolicy | Mapping[str, str]],
        default: ReviewDecision | None = None,
    ) -> None:
        self.policies = {name: _policy(name, value) for name, value in policies.items()}
        self.default = _policy("default", default) if default is not None else None

    def middleware_key(self) -> str:
        return "human_review"

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        """Decide by the tool's policy; tools without one go to the inner checks.

        ``allow`` still asks the inner checks and keeps their deny; it overrides only an ask.

        Runs before the call (outside on_acting); an ``ask`` emits the description, then
        the agent pauses. Errors fail closed.
        """
        call = kwargs["tool_call"]
        policy = self.policies.get(call.name, self.default)
        if policy is None:
            return await next_handler()
        if policy.decision == "allow":
            # The inner checks still run (a call limit, say): their deny stands; only their
            # ask (a tool marked needs_confirmation) is overridden.
            inner = await next_handler()
            if inner.behavior == "deny":
                return inner
        elif policy.decision == "ask":
            agent.emit(
                CustomEvent(
                    reply_id=agent.reply_id,
                    name=REVIEW_EVENT,
                    value={
                        "call_id": call.id,
                        "tool": call.name,
                        "description": policy.description,
                    },
                )
            )
        return PermissionDecision(policy.decision, policy.description)
