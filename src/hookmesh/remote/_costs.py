"""What a served middleware's subscriptions cost: the round trips to the sidecar they imply,
printed by `hookmesh sidecar` at start so its author sees the price of ``"*"``."""

from __future__ import annotations

from hookmesh.middleware import MiddlewareDescription

_PER = {
    "on_reply": "reply",
    "on_reasoning": "reasoning step",
    "on_acting": "tool call",
    "on_model_call": "model call",
    "on_check_permission": "permission check",
    "on_compress_context": "compression",
    "on_system_prompt": "reasoning step",
    "after_agent": "reply",
}


def cost_lines(description: MiddlewareDescription) -> list[str]:
    """One line per hook: its mode, its subscriptions and the round trips they imply."""
    lines = []
    watch_hint = False
    for hook, spec in description.hooks.items():
        per = _PER.get(hook, "invocation")
        if hook in ("on_system_prompt", "after_agent"):
            lines.append(f"{hook}: unary, 1 round trip per {per}")
            continue
        if spec.mode == "observe":
            lines.append(f"{hook}: observe, no round trip (never waited for)")
            continue
        if spec.mode == "pre_only":
            lines.append(f"{hook}: pre_only, 1 round trip per {per}")
            continue
        verdicts = ", ".join(spec.subscriptions) or "none"
        watched = ", ".join(spec.read_only_subscriptions) or "none"
        cost = f"2 round trips per {per}"
        if spec.subscriptions:
            items = "item" if "*" in spec.subscriptions else "subscribed item"
            cost += f" + 1 per {items} ({'every event' if '*' in spec.subscriptions else verdicts})"
            watch_hint = True
        lines.append(f"{hook}: intercept, verdicts on {verdicts}, read-only {watched}: {cost}")
    if watch_hint:
        lines.append(
            "a hook that only watches its items should name them in read_only_subscriptions "
            "(sent as they pass, no round trip each); see docs/writing-middleware.md"
        )
    return lines
