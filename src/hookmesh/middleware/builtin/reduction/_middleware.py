"""Tool-output reduction: truncate oversized tool results and clear old ones from the context."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    CompressArgs,
    CompressNext,
    UserRecord,
    user_folder,
)
from hookmesh.middleware._base import (
    FailureMode,
    Middleware,
)
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin.reduction._offload import FileStore, OffloadStore, safe_name
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    Message,
    TextBlock,
    ToolResult,
    ToolResultDeltaEvent,
    copy_message,
    estimate_tokens,
    tool_calls,
    tool_results,
)
from hookmesh.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    pass

log = logging.getLogger("hookmesh.middleware.reduction")

CLEARED_METADATA_KEY = "hookmesh.reduction.cleared"
"""Message metadata key: the call ids whose result (or arguments) this middleware cleared."""
CLEARED_EVENT = "hookmesh.reduction.cleared"
"""Name of the custom event emitted after a clearing pass."""
CLEARED_ARGUMENTS = '{"hookmesh_cleared": "arguments removed to save context"}'
"""What cleared tool-call arguments become (still a JSON object)."""

_CLEARED_TEXT = "[Old tool result cleared to save context.]"
_DEFAULT_READ_CHARS = 10_000
_TRUNCATED_HEAD = "[hookmesh: output truncated"
_POINTER = re.compile(re.escape(_TRUNCATED_HEAD) + r"[^\n]*\n([^\n]+)\n")


OFFLOAD_STORE = "offload.files"
"""The store name offloaded output has in erasure receipts and exports."""


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


def _limit(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, not {value!r}")
    return value


class ReductionMiddleware(Middleware):
    """Keeps tool output from flooding the context, in two phases.

    Truncation (`on_acting`): a tool result whose text exceeds `max_length` characters is
    saved in full to the offload store, and the result the agent writes into the context
    is a `preview_chars` preview plus a pointer to the saved text, in the result's own
    structure: text runs cut in order, media kept in place (``[text, image, text]`` stays
    ``[text, image, text]``). Clearing (`on_compress_context`): when the context's token estimate
    exceeds `max_tokens_for_clear`, every tool result but the `keep_recent` newest is
    replaced by a short placeholder (its text offloaded first when `offload_cleared`), and,
    with `clear_arguments`, so are the arguments of those calls. Cleared messages keep
    their ids and are marked in metadata (`CLEARED_METADATA_KEY`: the cleared call ids), so
    nothing is processed twice; this works on both message kinds, including agentic user
    messages holding several tool results and text. With `read_tool_name` set, the
    middleware contributes a tool that reads offloaded output back, page by page.

    State: a per-reply count of cleared results in ``middle_context["reduction"][reply_id]``
    (``cleared``); the files live in the store. A ``hookmesh.reduction.cleared`` custom
    event reports each clearing pass.

    Per user: a reply with a user (`AgentView.user_id`, the agent service's caller) offloads
    under that user's folder (``<root>/user-<hash>/``, `user_folder`), so the agent
    service's `ForgetUser` and `ExportUser` reach its files (``offload.files``, with a
    `FileStore`), and its read tool reads only that folder or files outside every user's
    folder (those of replies without a user, and those offloaded before this layout).

    Not supported: truncating media; offloading media of cleared results (it is dropped);
    streaming a long result's deltas to the consumer as they come (they are held until the
    result ends, then the preview is sent). A store that fails is logged and the model is
    told the full text could not be saved; the context stays bounded either way. In a
    sidecar, the offload files and the read tool live on the sidecar's machine; clearing
    rewrites messages in place (same ids), which the sidecar host sends back as a context
    replacement, so it works there too.

    Example:
        >>> from pathlib import Path
        >>> mw = ReductionMiddleware(Path("/var/lib/agent/offload"), max_length=20_000)
        >>> mw.max_tokens_for_clear
        160000

    Args:
        root_dir: Directory for offloaded output (a `FileStore`); required unless `store`.
        max_length: Characters of result text above which a result is truncated; None
            disables truncation.
        preview_chars: Characters of the result kept as its preview.
        max_tokens_for_clear: Context token estimate above which old results are cleared;
            None disables clearing.
        keep_recent: The newest tool results that clearing never touches.
        clear_arguments: Also clear the arguments of calls whose results are cleared.
        offload_cleared: Save a cleared result's text to the store and point to it.
        exclude_tools: Tool names whose results are neither truncated nor cleared.
        read_tool_name: Name of the contributed read-back tool; None contributes none.
        store: Another offload backend instead of a `FileStore` on `root_dir`.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
        retention_seconds: Delete offloaded files (with a `FileStore`) this long after they
            were written; None keeps them. The agent service sweeps (`expire`).
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_acting": ("tool_result_delta", "tool_result_end")
    }

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        *,
        max_length: int | None = 50_000,
        preview_chars: int = 2_000,
        max_tokens_for_clear: int | None = 160_000,
        keep_recent: int = 1,
        clear_arguments: bool = False,
        offload_cleared: bool = True,
        exclude_tools: Iterable[str] = (),
        read_tool_name: str | None = "read_tool_output",
        store: OffloadStore | None = None,
        failure_mode: FailureMode = "fail_closed",
        retention_seconds: float | None = None,
    ) -> None:
        if (root_dir is None) == (store is None):
            raise ValueError(
                "ReductionMiddleware needs exactly one of root_dir (a directory for offloaded "
                "tool output) and store"
            )
        if root_dir is not None:
            store = FileStore(root_dir)
        elif not isinstance(store, OffloadStore):
            raise ValueError(f"store must be an OffloadStore, not {type(store).__name__}")
        self.store: OffloadStore = store
        self.max_length = _limit("max_length", max_length)
        self.preview_chars = _count("preview_chars", preview_chars, 0)
        if self.max_length is not None and self.preview_chars >= self.max_length:
            raise ValueError(
                f"preview_chars ({preview_chars}) must be smaller than max_length ({max_length})"
            )
        self.max_tokens_for_clear = _limit("max_tokens_for_clear", max_tokens_for_clear)
        self.keep_recent = _count("keep_recent", keep_recent, 0)
        for name, flag in (
            ("clear_arguments", clear_arguments),
            ("offload_cleared", offload_cleared),
        ):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be a bool, not {flag!r}")
        self.clear_arguments = clear_arguments
        self.offload_cleared = offload_cleared
        if isinstance(exclude_tools, str):
            raise ValueError("exclude_tools must be a collection of tool names, not one string")
        self.exclude_tools = frozenset(exclude_tools)
        if not all(isinstance(n, str) and n for n in self.exclude_tools):
            raise ValueError("exclude_tools must hold non-empty tool names")
        if read_tool_name is not None and not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_-]{0,63}", str(read_tool_name)
        ):
            raise ValueError(f"read_tool_name must be a tool name or None, not {read_tool_name!r}")
        self.read_tool_name = read_tool_name
        if failure_mode not in ("fail_closed", "fail_open"):
            raise ValueError(
                f"failure_mode must be 'fail_closed' or 'fail_open', not {failure_mode!r}"
            )
        self.failure_mode = failure_mode
        self.retention_seconds = (
            None
            if retention_seconds is None
            else check.positive("retention_seconds", retention_seconds)
        )
        self._tools = [self._read_tool(read_tool_name)] if read_tool_name else []

    def middleware_key(self) -> str:
        return "reduction"

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    # --- truncation ------------------------------------------------------------------------

    async def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Hold one tool's result deltas; at its end, pass them on or send the preview.

        Boundary: wraps only the tool's execution. The agent writes the result into the
        context outside this hook, from the deltas this hook yields, so the context holds
        the preview. Store errors never fail the call (the preview says the text was not
        saved); other errors follow `failure_mode`.
        """
        call = kwargs["tool_call"]
        if (
            self.max_length is None
            or call.name in self.exclude_tools
            or call.name == self.read_tool_name
        ):
            async for event in next_handler():
                yield event
            return
        held: list[ToolResultDeltaEvent] = []
        async for event in next_handler():
            if event.source_path:  # a nested run's events, inside this call
                yield event
                continue
            if event.type == "tool_result_delta" and event.call_id == call.id:
                held.append(event)
                continue
            if event.type == "tool_result_end" and event.call_id == call.id:
                for out in await self._shrink(agent, call.id, held):
                    yield out
                held = []
            yield event
        for out in held:
            yield out

    async def _shrink(
        self, agent: AgentView, call_id: str, held: list[ToolResultDeltaEvent]
    ) -> list[ToolResultDeltaEvent]:
        """The held deltas as they are, or their preview: the text runs cut, in order, to
        `preview_chars` characters in all, media in their places, the pointer closing the
        last text (its own block when media ends the preview)."""
        # Text runs and media, in order; each run's deltas are joined once (a long streamed
        # output comes in many small deltas: appending to a string would be quadratic).
        parts: list[list[str] | ToolResultDeltaEvent] = []
        for delta in held:
            if delta.media is not None:
                parts.append(delta)
            elif parts and isinstance(run := parts[-1], list):
                run.append(delta.text)
            else:
                parts.append([delta.text])
        pieces = ["".join(p) if isinstance(p, list) else p for p in parts]
        runs = [p for p in pieces if isinstance(p, str)]
        full = "\n".join(runs)
        assert self.max_length is not None
        if len(full) <= self.max_length:
            return held
        location = await self._offload(_key(agent, "truncated", call_id), full)
        pointer = (
            f"{_TRUNCATED_HEAD}: showing the first {self.preview_chars} of {len(full)} "
            f"characters.{self._where(location)}]"
        )
        reply_id = held[0].reply_id
        budget = self.preview_chars
        out: list[ToolResultDeltaEvent] = []
        for piece in pieces:
            if not isinstance(piece, str):
                out.append(piece)
            elif budget and piece:
                kept, budget = piece[:budget], budget - min(budget, len(piece))
                out.append(ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, text=kept))
        if out and out[-1].media is None:
            out[-1] = out[-1].model_copy(update={"text": f"{out[-1].text}\n\n{pointer}"})
        else:
            out.append(ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, text=pointer))
        return out

    async def _offload(self, key: Sequence[str], text: str) -> str | None:
        try:
            return await self.store.write(key, text)
        except Exception as exc:
            log.warning("could not offload tool output %s: %s", "/".join(key), exc, exc_info=exc)
            return None

    def _where(self, location: str | None) -> str:
        if location is None:
            return " The full text could not be saved."
        how = (
            f"Read it with the {self.read_tool_name} tool (offset and limit page through it)."
            if self.read_tool_name
            else "Read it with a file tool."
        )
        return f" Full output saved at:\n{location}\n{how}"

    # --- clearing --------------------------------------------------------------------------

    async def on_compress_context(
        self, agent: AgentView, kwargs: CompressArgs, next_handler: CompressNext
    ) -> None:
        """Clear old tool results (and arguments) when the context is over the threshold.

        Boundary: runs before each reasoning step, ahead of the inner compressors (so a
        summariser further in sees the cleared context). Edits `agent.state.context` in
        place, in one assignment after the offloads: edited messages are copies with the
        same ids. Store errors only drop the pointer; other errors follow `failure_mode`
        and leave the context untouched.
        """
        limit = self.max_tokens_for_clear
        context = agent.state.context
        before = estimate_tokens(context)
        if limit is not None and before > limit:
            cleared = await self._clear(agent, context)
            if cleared:
                state = self.state(agent)
                state["cleared"] = state.get("cleared", 0) + cleared
                agent.emit(
                    CustomEvent(
                        reply_id=agent.reply_id,
                        name=CLEARED_EVENT,
                        value={
                            "results": cleared,
                            "tokens_before": before,
                            "tokens_after": estimate_tokens(context),
                        },
                    )
                )
        await next_handler()

    async def _clear(self, agent: AgentView, context: list[Message]) -> int:
        edited = list(context)
        found = [(i, r) for i, msg in enumerate(context) for r in tool_results(msg)]
        older = found[: max(0, len(found) - self.keep_recent)]
        targets: dict[int, list[ToolResult]] = {}
        for i, result in older:
            if (
                result.name not in self.exclude_tools
                and result.call_id not in _cleared_ids(context[i])
                and _worth_clearing(result)
            ):
                targets.setdefault(i, []).append(result)
        done: set[str] = set()
        for i, results in targets.items():
            msg = copy_message(context[i])
            for result in results:
                location = await self._offload_cleared(agent, result)
                where = self._where(location) if location is not None else ""
                _set_result_text(msg, result.call_id, _CLEARED_TEXT[:-1] + where + "]")
            _mark(msg, [r.call_id for r in results])
            edited[i] = msg
            done.update(r.call_id for r in results)
        if self.clear_arguments and done:
            for i, msg in enumerate(edited):
                calls = [
                    c.id for c in tool_calls(msg) if c.id in done and c.id not in _cleared_ids(msg)
                ]
                if calls:
                    copy = copy_message(msg)
                    for call_id in calls:
                        _set_call_arguments(copy, call_id, CLEARED_ARGUMENTS)
                    _mark(copy, calls)
                    edited[i] = copy
        context[:] = edited
        return len(done)

    async def _offload_cleared(self, agent: AgentView, result: ToolResult) -> str | None:
        text = result.text
        if not self.offload_cleared or not text:
            return None
        found = _POINTER.findall(text)
        if found:
            return str(found[-1])
        return await self._offload(_key(agent, "cleared", result.call_id), text)

    # --- read-back tool -------------------------------------------------------------------

    def _read_tool(self, name: str) -> Tool:
        store = self.store
        cap = self.max_length or _DEFAULT_READ_CHARS * 5  # a page never needs truncating

        async def read_tool_output(
            path: str,
            offset: int = 0,
            limit: int = _DEFAULT_READ_CHARS,
            context: ToolContext[AgentView] | None = None,
        ) -> str:
            """Read tool output that was saved to a file because it was too long.

            Args:
                path: The path given where the output was truncated or cleared.
                offset: The first character to read.
                limit: How many characters to read at most.
            """
            try:
                if isinstance(store, FileStore):
                    _check_reader(store, path, context.agent.user_id if context else "")
                text = await store.read(path)
            except (ValueError, LookupError) as exc:
                raise ValueError(f"no saved tool output at {path!r} ({exc})") from None
            offset = max(0, offset)
            end = min(len(text), offset + max(1, min(limit, cap)))
            more = (
                f"\n[characters {offset}-{end} of {len(text)}; continue with offset={end}]"
                if end < len(text)
                else f"\n[characters {offset}-{end} of {len(text)}; end of output]"
            )
            return text[offset:end] + more

        made: Tool = tool(read_tool_output, name=name, read_only=True, concurrency_safe=True)
        return made

    # --- the user's files (HoldsUserData) -----------------------------------------------------

    def user_stores(self) -> tuple[str, ...]:
        """``offload.files`` with a `FileStore`; another store is not reached."""
        return (OFFLOAD_STORE,) if isinstance(self.store, FileStore) else ()

    async def forget_user(self, user_id: str) -> list[tuple[str, int]]:
        """Delete the user's folder of offloaded output."""
        if not isinstance(self.store, FileStore):
            return []
        return [(OFFLOAD_STORE, await self.store.delete_folder(user_folder(user_id)))]

    async def export_user(self, user_id: str) -> AsyncIterator[UserRecord]:
        """Each offloaded output of the user: its ``location`` and ``text``."""
        if isinstance(self.store, FileStore):
            async for location, text in self.store.folder_texts(user_folder(user_id)):
                yield OFFLOAD_STORE, {"location": location, "text": text}

    async def expire(self, now: datetime, limit: int) -> int:
        """Delete at most `limit` offloaded files older than `retention_seconds` (ExpiresData)."""
        if self.retention_seconds is None or not isinstance(self.store, FileStore):
            return 0
        return await self.store.expire(now - timedelta(seconds=self.retention_seconds), limit)


def _key(agent: AgentView, kind: str, call_id: str) -> tuple[str, ...]:
    """Where one output is offloaded: under the reply's user's folder when it has one."""
    head = (user_folder(agent.user_id),) if agent.user_id else ()
    return (*head, kind, agent.reply_id, call_id)


def _check_reader(store: FileStore, location: str, user_id: str) -> None:
    """Refuse a location in another user's folder.

    Raises:
        ValueError: It lies in a user folder that is not `user_id`'s, or not under the root.
    """
    top = store.top_folder(location)
    if top.startswith("user-") and top != (user_folder(user_id) if user_id else ""):
        raise ValueError("it belongs to another user")


def _worth_clearing(result: ToolResult) -> bool:
    """Worth a placeholder: it holds media, or more text than the placeholder."""
    return any(o.type != "text" for o in result.output) or len(result.text) > len(_CLEARED_TEXT)


def _cleared_ids(msg: Message) -> list[str]:
    value = (msg.metadata or {}).get(CLEARED_METADATA_KEY, [])
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _mark(msg: Message, call_ids: Iterable[str]) -> None:
    metadata = dict(msg.metadata or {})
    metadata[CLEARED_METADATA_KEY] = [*_cleared_ids(msg), *call_ids]
    msg.metadata = metadata


# NOTE(reduction): the two edits below are the only places that look at kind-specific fields;
# they belong with the kind-aware helpers in hookmesh.schema (rewrite one tool result's
# output / one call's arguments in place) and should move there.


def _set_result_text(msg: Message, call_id: str, text: str) -> None:
    """Replace the whole output (text and media) of the result of `call_id` by `text`."""
    if msg.kind == "flat":
        msg.content = text
        msg.parts = []
        return
    for block in msg.blocks:
        if block.type == "tool_result" and block.call_id == call_id:
            block.output = [TextBlock(text=text)]


def _set_call_arguments(msg: Message, call_id: str, arguments: str) -> None:
    """Replace the arguments of the tool call `call_id` made in `msg`."""
    if msg.kind == "flat":
        msg.tool_calls = [
            c.model_copy(update={"arguments": arguments}) if c.id == call_id else c
            for c in msg.tool_calls
        ]
        return
    for block in msg.blocks:
        if block.type == "tool_call" and block.call_id == call_id:
            block.arguments = arguments


__all__ = [
    "CLEARED_ARGUMENTS",
    "CLEARED_EVENT",
    "CLEARED_METADATA_KEY",
    "FileStore",
    "OffloadStore",
    "ReductionMiddleware",
    "safe_name",
]
