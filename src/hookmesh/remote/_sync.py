"""What the sidecar last told the agent of a hook's state slice and context: only changes go."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from hookmesh.remote import _codec as c
from hookmesh.schema import Message, message_from_proto, message_to_proto
from hookmesh.v1 import middleware_pb2 as _mw_pb2


def _fingerprint(context: list[Message]) -> list[tuple[str, bytes]]:
    return [(m.id, message_to_proto(m).SerializeToString(deterministic=True)) for m in context]


class Sync:
    """Tracks what the agent last saw of the state slice and context, to send only changes.

    The context is compared message by message (id and encoded bytes): pure appends and
    removals travel as such; anything else (an edit in place, an insertion, a reorder, a
    compression) replaces the whole context.
    """

    def __init__(self, state: dict[str, Any], context: list[Message], hook: str, key: str) -> None:
        self.state = state
        self.context = context
        self.hook = hook
        self.key = key
        self._sent_state = copy.deepcopy(state) if state else {}
        self._sent = _fingerprint(context)

    def take(self, state: Any, context: Any = ()) -> None:
        """Adopt the agent's newer state (and context), in place so held references stay live."""
        fresh = c.from_struct(state) if state.fields else {}
        # NOTE(hookmesh): only a slice that changed since we last sent ours is adopted: our
        # own changes not yet sent (while read-only items flow) are kept.
        if fresh != self._sent_state:
            self.state.clear()
            self.state.update(fresh)
            self._sent_state = copy.deepcopy(fresh)
        if context:
            self.context[:] = [message_from_proto(m, "outcome.context") for m in context]
            self._sent = _fingerprint(self.context)

    def mutation(self) -> _mw_pb2.StateMutation | None:
        out = _mw_pb2.StateMutation()
        changed = False
        if self.state != self._sent_state:
            out.state.CopyFrom(c.struct(self.state))
            self._sent_state = copy.deepcopy(self.state)
            changed = True
        for msg in self.context:
            if not msg.id:
                msg.id = uuid.uuid4().hex
        now = _fingerprint(self.context)
        if now != self._sent:
            sent = dict(self._sent)
            current = {i for i, _ in now}
            kept = [(i, b) for i, b in self._sent if i in current]
            added = [(i, b) for i, b in now if i not in sent]
            if self.hook != "on_compress_context" and now == kept + added:
                new_ids = {i for i, _ in added}
                out.append_messages.extend(
                    message_to_proto(m) for m in self.context if m.id in new_ids
                )
                out.remove_message_ids.extend(i for i, _ in self._sent if i not in current)
            else:
                out.replace_context.messages.extend(message_to_proto(m) for m in self.context)
            self._sent = now
            changed = True
        return out if changed else None
