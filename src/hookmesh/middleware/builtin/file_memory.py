"""Agentic file memory: markdown files in a ``Memory/`` folder, indexed by ``MEMORY.md``."""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from hookmesh.agent import Tool, ToolArgumentError, tool
from hookmesh.middleware import (
    AgentView,
    ReasoningArgs,
    ReasoningNext,
    ReplyArgs,
    ReplyNext,
    UserRecord,
    user_folder,
)
from hookmesh.middleware._base import FailureMode, HookMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._atomic import write_text_atomically
from hookmesh.middleware.builtin._support._frontmatter import split_front_matter
from hookmesh.models import ChatModel, answer_text, json_answer
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    HintBlockEvent,
    Message,
    is_user,
    make_hint,
    make_text,
    text_of,
)
from hookmesh.tools import ToolContext

if TYPE_CHECKING:
    pass

log = logging.getLogger("hookmesh.middleware.file_memory")

MemoryType = Literal["user", "feedback", "project", "reference"]
"""What a memory file is about: the user, feedback on the agent's work, the project, or a
pointer to something elsewhere."""
INDEX = "MEMORY.md"
"""The index file the system prompt shows."""
FILES_STORE = "file_memory.files"
"""The store name of per-user memory files in erasure receipts and exports."""
WARNING_EVENT = "file_memory.warning"
"""Name of the custom event reporting a failed file selection under ``fail_open``."""
DEFAULT_NOTE = (
    "You keep a long-term memory as markdown files in a folder; MEMORY.md below lists them. "
    "Before answering, files relevant to the request are shown to you. Save what should "
    "outlast this conversation with write_memory (one topic per file; type user for facts "
    "about the user, feedback for how they want you to work, project for ongoing work, "
    "reference for where to find things); writing an existing name replaces that file. "
    "read_memory reads a file the index lists. Never store secrets."
)
"""The system-prompt text above the index."""
SELECT_INSTRUCTION = (
    "You choose which memory files could help with the user's request. You see each file's "
    "name, type and description. Answer with JSON only, of the form "
    '{{"files": ["name.md", ...]}}, naming at most {max_files} files from the list, most '
    'relevant first; answer {{"files": []}} when none is relevant.'
)
"""The selection model's system instruction (``{max_files}`` is filled in)."""

_CHARS_PER_TOKEN = 4
_INDEX_LINK = re.compile(r"- \[[^\]\n]*\]\(([^)\s]+)\)")  # an index line's own link
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}\.md$")
_MAX_DESCRIPTION = 300
_MAX_FILE_CHARS = 50_000


class _Frontmatter(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    description: str
    type: MemoryType


class _Selection(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    files: list[str]


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """A memory file as listed for selection."""

    file: str
    """Its file name in the folder (``diet.md``)."""
    name: str
    """Its frontmatter name."""
    description: str
    """Its one-line description."""
    type: MemoryType
    """Its type."""


def parse_memory_file(text: str) -> tuple[_Frontmatter | None, str]:
    """A memory file's frontmatter (None when missing or invalid) and its body."""
    data, body = split_front_matter(text)
    if data is None:
        return None, text
    try:
        return _Frontmatter.model_validate(data), body
    except ValidationError:
        return None, text


def _cut(text: str, max_chars: int, note: str) -> str:
    """`text` within `max_chars`, cut at a line end when one is near, with `note` after."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    if cut < max_chars // 2:
        cut = max_chars
    rest = text[cut:].count("\n")
    return text[:cut].rstrip() + f"\n… ({note}; {rest} more lines not shown)"


def _linked(line: str) -> str | None:
    """The file an index line lists: the target of the link it starts with (a link inside a
    description is not the line's own)."""
    match = _INDEX_LINK.match(line)
    return match.group(1) if match else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


class FileMemoryMiddleware(Middleware):
    """The agent's own long-term memory as markdown files it reads and writes (no service).

    The folder (`root`, default ``Memory/``) holds one markdown file per topic, each with
    YAML frontmatter ``name``, ``description`` and ``type`` (``user``, ``feedback``,
    ``project`` or ``reference``), and ``MEMORY.md``, an index with one line per file.

    - System prompt (`on_system_prompt`, before every reasoning step, so an index line
      written mid-reply is in the next step's prompt): a short note and the index, cut to
      `index_max_tokens` (about 4 characters a token).
    - Recall: before the first reasoning step of a reply, a chat model (`model`, else the
      agent's own in process) sees the user's input and the frontmatter list (the
      `max_listed_files` most recently changed files) and picks at most `max_files`; names
      not in the list are dropped. Their contents (each cut to `max_tokens_per_file`) are
      shown to the model as a hint before every step of the reply and removed after each.
      A hint_block event reports the selection once.
    - Writing: ``write_memory(name, description, type, content)`` creates or replaces
      ``<name>.md`` in the folder (atomically) and its line in ``MEMORY.md`` (other lines
      are kept as written). ``read_memory(name)`` reads one file. Both are confined to the
      folder: a name is a plain file name (letters, digits, ``_ . -``; no separators, no
      ``MEMORY.md``), and symbolic links are neither followed nor replaced.

    Failures of the selection model (error, timeout) follow `failure_mode` (``fail_open``
    default: a ``file_memory.warning`` event, no files shown); an answer that is not
    ``{"files": [...]}`` JSON selects nothing. State: ``middle_context["file_memory"]
    [reply_id]`` holds the user's input and the selected file names; the instance keeps only
    its folder and a write lock, so it may serve many agents.

    Per user (`per_user`): each reply's user (`AgentView.user_id`, the agent service's
    caller) gets a folder of their own under `root`, ``user-<hash>/`` (`user_folder`: the
    path names no user), which is all that reply's prompt, selection and tools see; a reply
    without a user uses `root` itself. The agent service's `ForgetUser` deletes a user's
    folder and `ExportUser` hands over its files (``file_memory.files``). Without
    `per_user` the folder is shared by every user and neither reaches it.

    Not supported: sub-folders; several processes writing one folder at once (writes are
    serialised per instance only).

    Example:
        >>> mw = FileMemoryMiddleware("Memory")
        >>> sorted(t.name for t in mw.list_tools())
        ['read_memory', 'write_memory']

    Args:
        root: The memory folder (created on the first write).
        model: The selection model; None uses the agent's model (in process only).
        index_max_tokens: Budget of the index in the system prompt.
        max_files: Most files shown per reply.
        max_tokens_per_file: Budget of each shown file.
        max_listed_files: Most files offered to the selection model.
        timeout: Seconds the selection may take.
        failure_mode: ``fail_open`` (default) or ``fail_closed``.
        note: The text above the index in the system prompt.
        per_user: A folder per user under `root` (see above).
        retention_seconds: Delete memory files not written for this long (with their index
            lines, in every user's folder); None keeps them. The agent service sweeps
            (`expire`).
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": (), "on_reasoning": ()}
    hook_modes: Mapping[str, HookMode] = {"on_reply": "pre_only"}

    def __init__(
        self,
        root: str | Path = "Memory",
        *,
        model: ChatModel | None = None,
        index_max_tokens: int = 4000,
        max_files: int = 5,
        max_tokens_per_file: int = 2000,
        max_listed_files: int = 200,
        timeout: float = 30.0,
        failure_mode: FailureMode = "fail_open",
        note: str = DEFAULT_NOTE,
        per_user: bool = False,
        retention_seconds: float | None = None,
    ) -> None:
        if model is not None and not isinstance(model, ChatModel):
            raise ValueError(f"model must be a ChatModel or None, not {type(model).__name__}")
        for label, value in (
            ("index_max_tokens", index_max_tokens),
            ("max_files", max_files),
            ("max_tokens_per_file", max_tokens_per_file),
            ("max_listed_files", max_listed_files),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an int >= 1, not {value!r}")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if failure_mode not in ("fail_open", "fail_closed"):
            raise ValueError(
                f"failure_mode must be 'fail_open' or 'fail_closed', not {failure_mode!r}"
            )
        self.root = Path(root)
        self.model = model
        self.index_max_tokens = index_max_tokens
        self.max_files = max_files
        self.max_tokens_per_file = max_tokens_per_file
        self.max_listed_files = max_listed_files
        self.timeout = timeout
        self.failure_mode = failure_mode
        self.note = note
        self.per_user = per_user
        self.retention_seconds = (
            None
            if retention_seconds is None
            else check.positive("retention_seconds", retention_seconds)
        )
        self._write_lock = threading.Lock()
        self._tools = self._make_tools()

    def middleware_key(self) -> str:
        return "file_memory"

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    # --- the folder ------------------------------------------------------------------------

    def folder_of(self, user_id: str) -> Path:
        """The folder a reply of `user_id` reads and writes."""
        return self.root / user_folder(user_id) if self.per_user and user_id else self.root

    def path_of(self, name: str, folder: Path | None = None) -> Path:
        """The file a memory name refers to, inside `folder` (default `root`).

        Raises:
            ToolArgumentError: Not a plain file name, the index, or a symbolic link.
        """
        file = name.strip()
        if not file.endswith(".md"):
            file += ".md"
        if not _FILE_NAME.fullmatch(file) or file.lower() == INDEX.lower():
            raise ToolArgumentError(
                f"{name!r} is not a memory name: use 1-80 letters, digits, '_', '.' or '-' "
                f"(no folders), other than {INDEX}"
            )
        root = (folder or self.root).resolve()
        path = root / file
        if path.is_symlink() or path.resolve().parent != root:
            raise ToolArgumentError(f"{file} is outside the memory folder")
        return path

    def catalog(self, folder: Path | None = None) -> list[MemoryFile]:
        """The memory files with valid frontmatter in `folder` (default `root`), most
        recently changed first (blocking)."""
        folder = folder or self.root
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            if path.name == INDEX or path.suffix != ".md" or path.is_symlink():
                continue
            if not path.is_file() or not _FILE_NAME.fullmatch(path.name):
                continue
            found.append((path.stat().st_mtime_ns, path))
        found.sort(key=lambda item: (-item[0], item[1].name))
        out = []
        for _, path in found[: self.max_listed_files]:
            try:
                meta, _ = parse_memory_file(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            if meta is not None:
                out.append(MemoryFile(path.name, meta.name, _one_line(meta.description), meta.type))
        return out

    def index_text(self, folder: Path | None = None) -> str:
        """``MEMORY.md`` of `folder` (default `root`) cut to the token budget (blocking); ""
        when there is none."""
        path = (folder or self.root) / INDEX
        if path.is_symlink() or not path.is_file():
            return ""
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        return _cut(text, self.index_max_tokens * _CHARS_PER_TOKEN, "index truncated")

    def _contents(self, files: Sequence[str], folder: Path) -> str:
        parts = []
        budget = self.max_tokens_per_file * _CHARS_PER_TOKEN
        for file in files:
            try:
                path = self.path_of(file, folder)
                text = path.read_text(encoding="utf-8", errors="replace")
            except (ToolArgumentError, OSError):
                continue  # deleted or replaced by a link since it was selected
            parts.append(f"## {file}\n{_cut(text.strip(), budget, 'file truncated')}")
        return "\n\n".join(parts)

    def _write(
        self, name: str, description: str, kind: MemoryType, content: str, folder: Path
    ) -> str:
        path = self.path_of(name, folder)
        description = _one_line(description)
        if not description or len(description) > _MAX_DESCRIPTION:
            raise ToolArgumentError(f"description must be one line of 1-{_MAX_DESCRIPTION} chars")
        if len(content) > _MAX_FILE_CHARS:
            raise ToolArgumentError(f"content is longer than {_MAX_FILE_CHARS} characters")
        title = path.name.removesuffix(".md")
        head = yaml.safe_dump(
            {"name": title, "description": description, "type": kind},
            allow_unicode=True,
            sort_keys=False,
            width=1000,
        )
        body = f"---\n{head}---\n\n{content.strip()}\n"
        entry = f"- [{title}]({path.name}) ({kind}) — {description}"
        with self._write_lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(path, body)
            index = path.parent / INDEX
            if index.is_symlink():
                raise ToolArgumentError(f"{INDEX} is a link; not touching it")
            old = index.read_text(encoding="utf-8") if index.is_file() else "# Memory index\n"
            lines = old.rstrip("\n").split("\n")
            spot = next((i for i, line in enumerate(lines) if _linked(line) == path.name), None)
            if spot is None:
                lines.append(entry)
            else:
                lines[spot] = entry
            write_text_atomically(index, "\n".join(lines) + "\n")
        return f"Saved {path.name} and listed it in {INDEX}."

    def _read(self, name: str, folder: Path) -> str:
        path = self.path_of(name, folder)
        if not path.is_file():
            raise ToolArgumentError(f"there is no memory file {path.name}")
        text = path.read_text(encoding="utf-8", errors="replace")
        return _cut(text, self.max_tokens_per_file * _CHARS_PER_TOKEN, "file truncated")

    def _make_tools(self) -> list[Tool]:
        async def write_memory(
            name: str,
            description: str,
            type: MemoryType,
            content: str,
            context: ToolContext[AgentView] | None = None,
        ) -> str:
            """Save (or replace) a memory file and list it in MEMORY.md.

            Args:
                name: File name, e.g. "diet" or "diet.md" (letters, digits, _ . -).
                description: One line saying what the file holds (shown in the index).
                type: user, feedback, project or reference.
                content: The memory itself, in markdown.
            """
            folder = self._folder(context)
            return await asyncio.to_thread(self._write, name, description, type, content, folder)

        async def read_memory(name: str, context: ToolContext[AgentView] | None = None) -> str:
            """Read a memory file listed in MEMORY.md.

            Args:
                name: Its file name, e.g. "diet.md".
            """
            return await asyncio.to_thread(self._read, name, self._folder(context))

        return [
            tool(write_memory),
            tool(read_memory, read_only=True, concurrency_safe=True),
        ]

    def _folder(self, context: ToolContext[AgentView] | None) -> Path:
        return self.folder_of(context.agent.user_id if context is not None else "")

    # --- the users' folders (HoldsUserData) ------------------------------------------------

    def user_stores(self) -> tuple[str, ...]:
        """``file_memory.files`` with `per_user`; a shared folder is not keyed by user."""
        return (FILES_STORE,) if self.per_user else ()

    async def forget_user(self, user_id: str) -> list[tuple[str, int]]:
        """Delete the user's folder (with `per_user`); how many files it held."""
        if not self.per_user:
            return []

        def delete() -> int:
            folder = self.folder_of(user_id)
            if folder.is_symlink() or not folder.is_dir():
                return 0
            with self._write_lock:
                count = sum(1 for p in folder.iterdir() if p.is_file() or p.is_symlink())
                shutil.rmtree(folder)
            return count

        return [(FILES_STORE, await asyncio.to_thread(delete))]

    async def export_user(self, user_id: str) -> AsyncIterator[UserRecord]:
        """Each file of the user's folder (with `per_user`), by name: ``file`` and ``text``
        (``MEMORY.md`` included)."""
        if not self.per_user:
            return
        folder = self.folder_of(user_id)

        def listing() -> list[Path]:
            if folder.is_symlink() or not folder.is_dir():
                return []
            return sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink())

        for path in await asyncio.to_thread(listing):
            try:
                text = await asyncio.to_thread(path.read_text, encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            yield FILES_STORE, {"file": path.name, "text": text}

    async def expire(self, now: datetime, limit: int) -> int:
        """Delete at most `limit` memory files older than `retention_seconds`, oldest first,
        and their lines in their folder's index (ExpiresData)."""
        if self.retention_seconds is None:
            return 0
        cutoff = (now - timedelta(seconds=self.retention_seconds)).timestamp()
        return await asyncio.to_thread(self._expire, cutoff, limit)

    def _expire(self, cutoff: float, limit: int) -> int:
        if not self.root.is_dir():
            return 0
        folders = [self.root]
        if self.per_user:
            folders += [p for p in self.root.iterdir() if p.name.startswith("user-") and p.is_dir()]
        old: list[tuple[float, Path]] = []
        for folder in folders:
            if folder.is_symlink():
                continue
            for path in folder.iterdir():
                if path.name == INDEX or path.suffix != ".md" or path.is_symlink():
                    continue
                if path.is_file() and (mtime := path.stat().st_mtime) < cutoff:
                    old.append((mtime, path))
        old.sort()
        with self._write_lock:
            for _, path in old[:limit]:
                path.unlink(missing_ok=True)
                index = path.parent / INDEX
                if index.is_file() and not index.is_symlink():
                    lines = index.read_text(encoding="utf-8").rstrip("\n").split("\n")
                    kept = [line for line in lines if _linked(line) != path.name]
                    if kept != lines:
                        write_text_atomically(index, "\n".join(kept) + "\n")
        return len(old[:limit])

    # --- hooks -----------------------------------------------------------------------------

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Before the reply: keep the user's input for the selection (no per-event cost)."""
        if kwargs.get("resume") is None:
            inputs: list[Message] = list(kwargs.get("inputs") or ())
            state = self.state(agent)
            state.clear()
            state["query"] = "\n".join(text_of(m) for m in inputs if is_user(m) and text_of(m))
        return next_handler()

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """Add the note and the index (cut to its budget)."""
        index = await asyncio.to_thread(self.index_text, self.folder_of(agent.user_id))
        text = f"{self.note}\n\n{INDEX}:\n{index or '(empty: no memories yet)'}"
        return f"{prompt}\n\n{text}" if prompt else text

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Wraps each reasoning step: select files before the first, show them at each.

        The selection runs once per reply; the files' contents are read again for every
        step (so a file written meanwhile shows its new text), added as a hint and removed
        after the step, even on error. Selection failures follow `failure_mode`.
        """
        state = self.state(agent)
        first = "selected" not in state
        if first:
            state["selected"] = []
            try:
                state["selected"] = await self._select(agent, state.get("query", ""))
            except Exception as exc:
                if self.failure_mode == "fail_closed":
                    raise
                log.warning("memory file selection failed; no files shown: %s", exc)
                yield CustomEvent(
                    reply_id=agent.reply_id,
                    name=WARNING_EVENT,
                    value={"message": f"memory file selection failed: {exc}"},
                )
        selected: list[str] = state.get("selected") or []
        folder = self.folder_of(agent.user_id)
        text = await asyncio.to_thread(self._contents, selected, folder) if selected else ""
        if not text:
            async for event in next_handler():
                yield event
            return
        text = f"Memory files that may be relevant (from {self.root.name}/):\n\n{text}"
        hint_id = f"{agent.reply_id}-file-memory"
        agent.state.context.append(make_hint(agent.kind, text, self.middleware_key(), id=hint_id))
        try:
            if first:
                yield HintBlockEvent(
                    reply_id=agent.reply_id, block_id=hint_id, text=text, source="file_memory"
                )
            async for event in next_handler():
                yield event
        finally:
            agent.state.context[:] = [m for m in agent.state.context if m.id != hint_id]

    async def _select(self, agent: AgentView, query: str) -> list[str]:
        """The files the model picks for `query` (only names from the list, at most
        `max_files`); [] when there is nothing to pick from or no model."""
        files = await asyncio.to_thread(self.catalog, self.folder_of(agent.user_id))
        if not files or not query.strip():
            return []
        model = self.model or agent.model
        if model is None:
            log.info("no selection model (pass model= in a sidecar): no memory files shown")
            return []
        listing = "\n".join(f"- {f.file} ({f.type}): {f.description}" for f in files)
        prompt = [
            make_text(agent.kind, "system", SELECT_INSTRUCTION.format(max_files=self.max_files)),
            make_text(agent.kind, "user", f"Request:\n{query}\n\nMemory files:\n{listing}"),
        ]
        async with asyncio.timeout(self.timeout):
            answer = await answer_text(model, prompt, agent.kind)
        return self._chosen(answer, [f.file for f in files])

    def _chosen(self, answer: str, listed: list[str]) -> list[str]:
        picked = json_answer(answer, _Selection)
        if picked is None:
            log.info('the selection model\'s answer is not {"files": [...]}: %r', answer[:80])
            return []
        known = set(listed)
        out: dict[str, None] = {}
        for name in picked.files:
            name = name.strip()
            file = name if name in known else f"{name}.md"
            if file in known:
                out.setdefault(file, None)
        return list(out)[: self.max_files]
