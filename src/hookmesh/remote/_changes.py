"""What a sidecar may change on the agent's side: its state, the context, the kwargs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hookmesh.middleware import OVERRIDES, AgentView, Middleware
from hookmesh.remote import _codec as c
from hookmesh.remote._errors import protocol_error
from hookmesh.schema import HINT_METADATA_KEY, Message, is_hint, message_from_proto, to_kind
from hookmesh.tools import ToolArgumentError
from hookmesh.v1 import middleware_pb2 as _mw_pb2

OVERRIDE_ARM = {"on_reasoning": "reasoning", "on_model_call": "model_call", "on_acting": "acting"}
"""The CallNext overrides arm of each hook that takes overrides (`OVERRIDES` says which)."""


def owns_hint(msg: Message, key: str) -> bool:
    """Whether `msg` is a hint message added by the middleware keyed `key`."""
    if not is_hint(msg):
        return False
    if msg.kind == "flat":
        return (msg.metadata or {}).get(HINT_METADATA_KEY) == key
    return all(b.source == key for b in msg.blocks if b.type == "hint")


def apply_mutation(mw: Middleware, agent: AgentView, mutation: _mw_pb2.StateMutation) -> None:
    """Apply a sidecar's state and context changes, refusing what it may not touch.

    Raises:
        SidecarError: SIDECAR_PROTOCOL_ERROR, before anything is applied, for a context
            change that needs the context the middleware did not ask for.
    """
    key = mw.middleware_key()
    context = agent.state.context
    if not mw.needs_context:
        if mutation.HasField("replace_context"):
            raise protocol_error(
                f"{key} replaced the context without asking for it (needs_context)",
                middleware=key,
            )
        if mutation.remove_message_ids:
            ids = set(mutation.remove_message_ids)
            for msg in context:
                if msg.id in ids and not owns_hint(msg, key):
                    raise protocol_error(
                        f"{key} may remove only its own hints without needs_context",
                        middleware=key,
                        messageId=msg.id,
                    )
    if mutation.HasField("state"):
        state = mw.state(agent)
        state.clear()
        state.update(c.from_struct(mutation.state))
    if mutation.remove_message_ids:
        ids = set(mutation.remove_message_ids)
        context[:] = [m for m in context if m.id not in ids]
    if mutation.append_messages:
        new = [message_from_proto(pb, "mutate.append_messages") for pb in mutation.append_messages]
        context.extend(to_kind(new, agent.kind))
    if mutation.HasField("replace_context"):
        new = [
            message_from_proto(pb, "mutate.replace_context")
            for pb in mutation.replace_context.messages
        ]
        context[:] = to_kind(new, agent.kind)


def overrides(
    mw: Middleware,
    hook: str,
    call_next: _mw_pb2.CallNext,
    agent: AgentView,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """The downstream kwargs a `call_next` replaces, as `next_handler` takes them (the chain
    then checks them as it checks an in-process middleware's).

    Raises:
        SidecarError: SIDECAR_PROTOCOL_ERROR for an arm of another hook, a prompt override
            without needs_context, or arguments that are not a JSON object.
        HookmeshError: UNKNOWN_MODEL for a model the agent has not configured.
    """
    arm = call_next.WhichOneof("overrides")
    if arm is None:
        return {}
    if OVERRIDE_ARM.get(hook) != arm:
        raise protocol_error(f"call_next carries {arm} overrides in {hook}", hook=hook, arm=arm)
    pb = getattr(call_next, arm)
    out: dict[str, Any] = {}
    if arm in ("reasoning", "model_call") and pb.HasField("tool_choice"):
        out["tool_choice"] = pb.tool_choice
    if arm == "model_call":
        if pb.HasField("messages"):
            if not mw.needs_context:
                raise protocol_error(
                    f"{mw.middleware_key()} replaced a prompt it cannot see (needs_context)",
                    hook=hook,
                )
            out["messages"] = to_kind(
                [message_from_proto(m, "call_next.messages") for m in pb.messages.messages],
                agent.kind,
            )
        if pb.HasField("model"):
            out["model"] = agent.resolve_model(pb.model)
        if pb.HasField("tools"):
            keep = frozenset(pb.tools.names)
            out["tools"] = [t for t in kwargs["tools"] if t["name"] in keep]
    if arm == "acting" and pb.HasField("arguments"):
        try:
            arguments = json.loads(pb.arguments)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"call_next arguments for {hook} are not a JSON object")
        out["arguments"] = arguments
    assert out.keys() <= OVERRIDES[hook]
    return out
