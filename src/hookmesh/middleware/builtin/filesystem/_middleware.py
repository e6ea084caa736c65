"""Filesystem tools: ls, read_file, write_file, edit_file, glob, grep (and an opt-in execute)
inside one workspace folder."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from hookmesh.middleware import AgentView
from hookmesh.middleware._base import Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._confine import ConfinedRoot
from hookmesh.middleware.builtin.filesystem import _ops as ops
from hookmesh.middleware.builtin.filesystem._command import run_command
from hookmesh.middleware.builtin.filesystem._ops import MEDIA_TYPES, FileLimits, FileToolError
from hookmesh.schema import ToolOutputBlock
from hookmesh.tools import Tool, tool

if TYPE_CHECKING:
    pass

TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute")
"""Every tool the middleware can contribute."""
WRITE_TOOLS = frozenset({"write_file", "edit_file", "execute"})
"""The tools read-only mode leaves out."""
DEFAULT_NOTE = (
    "You work in a workspace folder through file tools. Paths are relative to the "
    "workspace (absolute paths and '..' that leave it are refused). Find files with glob "
    "and grep, read them with read_file (large files a page at a time with offset and "
    "limit), and change them with edit_file (exact text replacement) or write_file."
)
"""The system-prompt note added by default."""


class FilesystemMiddleware(Middleware):
    """File tools for coding and research agents, confined to one workspace folder.

    Contributes ``ls``, ``read_file`` (line ranges; images and PDFs as media blocks),
    ``write_file``, ``edit_file`` (exact, unique replacement), ``glob`` and ``grep`` (RE2
    regexes: linear time, so no pattern can hang the worker), and optionally ``execute``
    (an argv run without a shell in the workspace, with a timeout, an output cap, a clean
    environment, and ``needs_confirmation`` so the permission hook asks the user). Every
    path goes through one confinement rule (`ConfinedRoot`): ``..``, absolute paths and
    symlinks that leave the workspace are refused. Every output is bounded: by the per-tool
    limits, then by `max_output_chars`.

    Large outputs and the reduction middleware: with a `ReductionMiddleware` attached too,
    set `max_output_chars` to None (or above its ``max_length``): a long result then
    reaches reduction whole, which offloads it and leaves a preview and a pointer that its
    read-back tool pages through. Alone, this middleware cuts outputs at
    `max_output_chars` and tells the model how to narrow the request.

    Hooks: only `on_system_prompt` (a short note, unless `prompt_note` is None); the tools
    are plain tools, so served by a sidecar they run there through ``CallTool``. No state.
    ``execute`` is not a sandbox: the command can reach anything the process can; keep it
    off (the default) unless the workspace runs somewhere disposable.

    Example:
        >>> import tempfile
        >>> fs = FilesystemMiddleware(tempfile.mkdtemp(), read_only=True)
        >>> [t.name for t in fs.list_tools()]
        ['ls', 'read_file', 'glob', 'grep']

    Args:
        root: The workspace folder (must exist).
        read_only: Leave out write_file, edit_file and execute.
        disable: Tool names to leave out.
        media: read_file returns images and PDFs as media blocks (else a short note).
        max_output_chars: Characters of one tool result above which it is cut; None: no
            cut (for use with the reduction middleware).
        max_file_bytes: Largest file edit_file edits, grep searches or write_file writes.
        max_media_bytes: Largest image or PDF read_file returns.
        max_line_chars: Characters of one line shown by read_file and grep.
        max_entries: Most entries of ls and glob, and most grep matches.
        execute: Contribute the execute tool.
        execute_timeout: Seconds a command may run (the model may ask for less).
        execute_max_output: Bytes of a command's output kept.
        execute_needs_confirmation: The user confirms each execute call.
        prompt_note: System-prompt text about the tools; None adds none.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        disable: Iterable[str] = (),
        media: bool = True,
        max_output_chars: int | None = 50_000,
        max_file_bytes: int = 1_000_000,
        max_media_bytes: int = 5_000_000,
        max_line_chars: int = 2_000,
        max_entries: int = 200,
        execute: bool = False,
        execute_timeout: float = 30.0,
        execute_max_output: int = 50_000,
        execute_needs_confirmation: bool = True,
        prompt_note: str | None = DEFAULT_NOTE,
    ) -> None:
        self.workspace = ConfinedRoot(root, "the workspace")
        if not self.workspace.root.is_dir():
            raise ValueError(f"root must be an existing folder, not {os.fspath(root)!r}")
        self.disable = check.names("disable", disable)
        unknown = self.disable - set(TOOL_NAMES)
        if unknown:
            raise ValueError(
                f"disable names unknown tools {sorted(unknown)}; the tools are {list(TOOL_NAMES)}"
            )
        self.read_only = check.flag("read_only", read_only)
        self.media = check.flag("media", media)
        self.max_output_chars = check.optional_whole("max_output_chars", max_output_chars)
        self.limits = FileLimits(
            max_file_bytes=check.whole("max_file_bytes", max_file_bytes),
            max_media_bytes=check.whole("max_media_bytes", max_media_bytes),
            max_line_chars=check.whole("max_line_chars", max_line_chars),
            max_entries=check.whole("max_entries", max_entries),
        )
        self.execute = check.flag("execute", execute)
        self.execute_timeout = check.positive("execute_timeout", execute_timeout)
        self.execute_max_output = check.whole("execute_max_output", execute_max_output)
        self.execute_needs_confirmation = check.flag(
            "execute_needs_confirmation", execute_needs_confirmation
        )
        if prompt_note is not None and not isinstance(prompt_note, str):
            raise ValueError("prompt_note must be a string or None")
        self.prompt_note = prompt_note
        self._tools = [t for t in self._build() if self._offered(t.name)]

    def middleware_key(self) -> str:
        return "filesystem"

    def implements(self, hook: str) -> bool:
        if hook == "on_system_prompt":
            return bool(self.prompt_note)
        return super().implements(hook)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """Add the note on the file tools."""
        note = self.prompt_note or ""
        return f"{prompt}\n\n{note}" if prompt else note

    def _offered(self, name: str) -> bool:
        if name in self.disable or (self.read_only and name in WRITE_TOOLS):
            return False
        return name != "execute" or self.execute

    def _cap(self, text: str) -> str:
        limit = self.max_output_chars
        if limit is None or len(text) <= limit:
            return text
        return (
            text[:limit]
            + f"\n[output cut at {limit} of {len(text)} characters: narrow the request "
            "(read_file offset and limit, a narrower path or pattern)]"
        )

    def _sync(self, work: Callable[..., Any]) -> Callable[..., Any]:
        async def run(*args: Any) -> Any:
            result = await asyncio.to_thread(work, self.workspace, *args)
            return self._cap(result) if isinstance(result, str) else result

        return run

    def _build(self) -> list[Tool]:
        limits = self.limits
        listing, reading, writing = (self._sync(f) for f in (ops.list_dir, ops.read, ops.write))
        editing, globbing, grepping = (self._sync(f) for f in (ops.edit, ops.glob, ops.grep))

        async def ls(path: str = ".") -> str:
            """List a folder of the workspace: sub-folders end in '/', files show their size.

            Args:
                path: The folder, relative to the workspace ('.' is the workspace itself).
            """
            return await listing(path, limits)  # type: ignore[no-any-return]

        async def read_file(
            path: str,
            offset: Annotated[int, Field(ge=1)] = 1,
            limit: Annotated[int, Field(ge=1, le=5000)] = 2000,
        ) -> str | list[ToolOutputBlock]:
            """Read a text file as numbered lines (images and PDFs come back as the file).

            Args:
                path: The file, relative to the workspace.
                offset: The first line to show (1-based).
                limit: How many lines to show at most.
            """
            return await reading(path, offset, limit, self.media, limits)  # type: ignore[no-any-return]

        async def write_file(path: str, content: str) -> str:
            """Create a text file, or replace one's whole content (folders are created).

            Args:
                path: The file, relative to the workspace.
                content: The complete new content.
            """
            return await writing(path, content, limits)  # type: ignore[no-any-return]

        async def edit_file(
            path: str, old_string: str, new_string: str, replace_all: bool = False
        ) -> str:
            """Replace exact text in a file: old_string must appear exactly once (copy it with
            its whitespace), unless replace_all is set.

            Args:
                path: The file, relative to the workspace.
                old_string: The exact text to replace.
                new_string: The text to put in its place.
                replace_all: Replace every occurrence instead of requiring a unique one.
            """
            return await editing(path, old_string, new_string, replace_all, limits)  # type: ignore[no-any-return]

        async def glob(pattern: str, path: str = ".") -> str:
            """Find files and folders by glob pattern ('**' spans folders), sorted by path.

            Args:
                pattern: A relative pattern such as '**/*.py' or 'docs/*.md'.
                path: The folder to search from, relative to the workspace.
            """
            return await globbing(pattern, path, limits)  # type: ignore[no-any-return]

        async def grep(
            pattern: str, path: str = ".", include: str = "", ignore_case: bool = False
        ) -> str:
            """Search file contents by regular expression (RE2 syntax); one 'path:line: text'
            per matching line. Hidden folders, binary and very large files are skipped.

            Args:
                pattern: The regular expression.
                path: A file or folder to search, relative to the workspace.
                include: Only files whose path matches this glob (e.g. '*.py').
                ignore_case: Match letters in either case.
            """
            return await grepping(pattern, path, include, ignore_case, limits)  # type: ignore[no-any-return]

        async def execute(argv: list[str], timeout: float | None = None) -> str:
            """Run a program in the workspace (no shell: pass the program and its arguments
            as a list, e.g. ["python", "-m", "pytest", "-q"]); returns its exit code and
            output.

            Args:
                argv: The program and its arguments.
                timeout: Seconds to allow, at most the configured limit.
            """
            limit = self.execute_timeout if timeout is None else min(timeout, self.execute_timeout)
            if limit <= 0:
                raise FileToolError("timeout must be positive")
            text = await run_command(argv, self.workspace.root, limit, self.execute_max_output)
            return self._cap(text)

        def safe(func: Callable[..., Any]) -> Tool:
            made: Tool = tool(func, read_only=True, concurrency_safe=True)
            return made

        return [
            safe(ls),
            safe(read_file),
            tool(write_file),
            tool(edit_file),
            safe(glob),
            safe(grep),
            tool(execute, needs_confirmation=self.execute_needs_confirmation),
        ]


__all__ = [
    "DEFAULT_NOTE",
    "MEDIA_TYPES",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "FileToolError",
    "FilesystemMiddleware",
]
