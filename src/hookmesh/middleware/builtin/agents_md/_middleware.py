"""AGENTS.md: project instructions shown to the model before the conversation, at every model
call, never stored in the session."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, HookMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._confine import ConfinedRoot
from hookmesh.middleware.builtin.agents_md._files import AgentsFiles, Loaded
from hookmesh.schema import CustomEvent, Message, is_user, make_user_text

if TYPE_CHECKING:
    from hookmesh.models import ModelResult

log = logging.getLogger("hookmesh.middleware.agents_md")

AGENTS_MD_METADATA_KEY = "hookmesh.agents_md"
"""Message metadata key (value ``True``) tagging the inserted AGENTS.md message."""
WARNING_EVENT = "agents_md.warning"
"""Name of the custom event listing what was not loaded (once per reply)."""
DEFAULT_HEADER = (
    "Instructions for this project from its AGENTS.md files (they apply to the whole conversation):"
)
"""The first line of the inserted message."""


class AgentsMdMiddleware(Middleware):
    """Shows the project's AGENTS.md files to the model, as one tagged user message placed
    before the first user message of every model call.

    The message is added to the model call's input only (`on_model_call`), never to the
    context, so it is neither duplicated across steps nor stored in the session, and it
    survives every compression: summarisation and reduction run before each reasoning step
    on the context, and this middleware adds the message afterwards, to what they left. Its
    position in the middleware list does not matter for that (put it after a middleware
    that rewrites the model's input if it must see that middleware's output). A prompt that
    already holds a message tagged ``{AGENTS_MD_METADATA_KEY: True}`` is passed unchanged.

    Files: `files` are read from `root` on every model call (edits show at the next call).
    A ``@path`` token (at a line start or after a space, outside code) imports another
    file, relative to the importing file, up to `max_depth` levels; each file is included
    once. Every file and import must lie inside `root` (``..``, absolute paths and symlinks
    out are refused). The text is cut at `max_bytes` in total. What is missing, outside the
    root, too deep or over the cap is logged and reported once per reply by an
    ``agents_md.warning`` custom event (``{"warnings": [...]}``).

    State: ``{"warned": bool}`` in ``middle_context["agents_md"][reply_id]``. Remote:
    declares `needs_context` (a sidecar sees the model's input only then) and runs
    `on_model_call` in ``pre_only`` mode (one round trip per model call).

    Example:
        >>> import tempfile
        >>> AgentsMdMiddleware(tempfile.mkdtemp()).files
        ['AGENTS.md']

    Args:
        root: The folder files and imports are confined to.
        files: The AGENTS.md files, relative to `root`, in the order shown.
        max_bytes: Total bytes of text shown.
        max_depth: Levels of ``@path`` imports followed.
        header: The message's first line.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {"on_model_call": ()}
    hook_modes: Mapping[str, HookMode] = {"on_model_call": "pre_only"}

    def __init__(
        self,
        root: str | os.PathLike[str],
        files: Sequence[str] = ("AGENTS.md",),
        *,
        max_bytes: int = 65_536,
        max_depth: int = 5,
        header: str = DEFAULT_HEADER,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        confined = ConfinedRoot(root, "the AGENTS.md root")
        if isinstance(files, str) or not files or not all(isinstance(f, str) and f for f in files):
            raise ValueError("files must be a non-empty list of paths relative to root")
        self.files = list(files)
        self.max_bytes = check.whole("max_bytes", max_bytes)
        self.max_depth = check.whole("max_depth", max_depth, 0)
        self.header = header
        self.failure_mode = check.failure(failure_mode)
        self._files = AgentsFiles(confined, self.files, self.max_bytes, self.max_depth)

    def middleware_key(self) -> str:
        return "agents_md"

    async def load(self) -> Loaded:
        """Read the files and their imports now."""
        return await asyncio.to_thread(self._files.load)

    def render(self, loaded: Loaded) -> str:
        """The inserted message's text ("" when nothing was loaded)."""
        parts = []
        for path, parent, text in loaded.sections:
            title = f"# {path}" + (f" (imported by {parent})" if parent else "")
            parts.append(f"{title}\n{text}")
        if not parts:
            return ""
        body = "\n\n".join(parts)
        return f"<agents_md>\n{self.header}\n\n{body}\n</agents_md>"

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Insert the AGENTS.md message into this call's input, before the first user turn.

        Boundary: wraps one model call; the context is untouched. Unreadable files are
        warnings; other errors follow `failure_mode`.
        """
        messages: list[Message] = kwargs["messages"]
        if any((m.metadata or {}).get(AGENTS_MD_METADATA_KEY) for m in messages):
            return await next_handler()
        loaded = await self.load()
        state = self.state(agent)
        if loaded.warnings and not state.get("warned"):
            state["warned"] = True
            for warning in loaded.warnings:
                log.warning("AGENTS.md: %s", warning)
            agent.emit(
                CustomEvent(
                    reply_id=agent.reply_id, name=WARNING_EVENT, value={"warnings": loaded.warnings}
                )
            )
        text = self.render(loaded)
        if not text:
            return await next_handler()
        note = make_user_text(agent.kind, text)
        note.metadata = {AGENTS_MD_METADATA_KEY: True}
        at = next((i for i, m in enumerate(messages) if is_user(m)), len(messages))
        return await next_handler(messages=[*messages[:at], note, *messages[at:]])


__all__ = ["AGENTS_MD_METADATA_KEY", "DEFAULT_HEADER", "WARNING_EVENT", "AgentsMdMiddleware"]
