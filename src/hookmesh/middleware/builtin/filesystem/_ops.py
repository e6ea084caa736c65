"""The filesystem middleware's operations: list, read, write, edit, glob and grep inside a
confined root, each bounded in what it reads and returns (blocking: run them in a thread)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import re2

from hookmesh.middleware.builtin._support._atomic import write_text_atomically
from hookmesh.middleware.builtin._support._confine import ConfinedRoot, PathEscapeError
from hookmesh.schema import DocumentBlock, ImageBlock, InlineSource, TextBlock, ToolOutputBlock

MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}
"""File suffixes `read_file` returns as media blocks, with their media types."""
_SNIFF_BYTES = 8192


class FileToolError(ValueError):
    """A file tool cannot do what was asked; the message is shown to the model."""


@dataclass(frozen=True, slots=True)
class FileLimits:
    """What one file tool call may read and return."""

    max_file_bytes: int
    """Largest file read whole (edit_file) or searched (grep); and largest write."""
    max_media_bytes: int
    """Largest image or PDF returned as a media block."""
    max_line_chars: int
    """Characters of one line shown (longer lines are cut)."""
    max_entries: int
    """Most entries ls and glob list, and most matches grep shows."""


def _found(root: ConfinedRoot, path: str) -> Path:
    try:
        resolved = root.resolve(path)
    except PathEscapeError as exc:
        raise FileToolError(str(exc)) from None
    if not resolved.exists():
        raise FileToolError(f"{path!r} does not exist")
    return resolved


def _is_binary(head: bytes) -> bool:
    return b"\0" in head


def _line(text: str, limit: int) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= limit else text[:limit] + f" … [line cut at {limit} chars]"


def list_dir(root: ConfinedRoot, path: str, limits: FileLimits) -> str:
    """One line per entry: ``name/`` for folders, ``name (N bytes)`` for files."""
    folder = _found(root, path)
    if not folder.is_dir():
        raise FileToolError(f"{path!r} is a file, not a folder: read it with read_file")
    names = sorted(os.listdir(folder))
    lines = []
    for name in names[: limits.max_entries]:
        entry = folder / name
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            inside = root.inside(entry)
            lines.append(f"{name} -> (link{'' if inside else ' out of the workspace'})")
        elif stat.S_ISDIR(info.st_mode):
            lines.append(f"{name}/")
        else:
            lines.append(f"{name} ({info.st_size} bytes)")
    if len(names) > limits.max_entries:
        lines.append(f"[{len(names) - limits.max_entries} more entries not shown]")
    return "\n".join(lines) if lines else f"{root.show(folder)} is empty"


def read(
    root: ConfinedRoot, path: str, offset: int, limit: int, media: bool, limits: FileLimits
) -> str | list[ToolOutputBlock]:
    """Lines `offset`.. (1-based, at most `limit`) numbered like ``cat -n``; an image or PDF
    as a media block when `media`."""
    file = _found(root, path)
    if file.is_dir():
        raise FileToolError(f"{path!r} is a folder: list it with ls")
    shown = root.show(file)
    size = file.stat().st_size
    mime = MEDIA_TYPES.get(file.suffix.lower())
    if mime is not None:
        if not media:
            return f"{shown} is a {mime} file ({size} bytes); this agent reads files as text."
        if size > limits.max_media_bytes:
            raise FileToolError(
                f"{shown} is {size} bytes; media files over "
                f"{limits.max_media_bytes} bytes are not read"
            )
        data = file.read_bytes()
        source = InlineSource(data=data, mime_type=mime)
        block = (
            DocumentBlock(source=source, name=shown)
            if mime == "application/pdf"
            else ImageBlock(source=source, name=shown)
        )
        return [TextBlock(text=f"{shown} ({mime}, {size} bytes):"), block]
    offset, limit = max(1, offset), max(1, limit)
    with file.open("rb") as raw:
        if _is_binary(raw.read(_SNIFF_BYTES)):
            raise FileToolError(f"{shown} is a binary file ({size} bytes), not text")
    lines: list[str] = []
    more = False
    with file.open(encoding="utf-8", errors="replace", newline="") as f:
        for number, text in enumerate(f, start=1):
            if number < offset:
                continue
            if len(lines) == limit:
                more = True
                break
            lines.append(f"{number:>6}\t{_line(text, limits.max_line_chars)}")
    if not lines:
        return f"{shown} is empty" if size == 0 else f"{shown} has fewer than {offset} lines"
    if more:
        last = offset + limit - 1
        lines.append(f"[lines {offset}-{last} shown; read on with offset={last + 1}]")
    return "\n".join(lines)


def write(root: ConfinedRoot, path: str, content: str, limits: FileLimits) -> str:
    """Create or replace a text file (its folders are created)."""
    data = content.encode("utf-8")
    if len(data) > limits.max_file_bytes:
        raise FileToolError(f"content is {len(data)} bytes; the limit is {limits.max_file_bytes}")
    try:
        file = root.resolve(path)
    except PathEscapeError as exc:
        raise FileToolError(str(exc)) from None
    if file.is_dir():
        raise FileToolError(f"{path!r} is a folder")
    existed = file.exists()
    write_text_atomically(file, content)
    return f"{'Replaced' if existed else 'Created'} {root.show(file)} ({len(data)} bytes)"


def edit(
    root: ConfinedRoot, path: str, old: str, new: str, replace_all: bool, limits: FileLimits
) -> str:
    """Replace the one occurrence of `old` (or every one, with `replace_all`)."""
    file = _found(root, path)
    shown = root.show(file)
    if file.is_dir():
        raise FileToolError(f"{path!r} is a folder")
    if not old:
        raise FileToolError("old_string must not be empty")
    if old == new:
        raise FileToolError("old_string and new_string are the same: nothing to change")
    if file.stat().st_size > limits.max_file_bytes:
        raise FileToolError(f"{shown} is larger than {limits.max_file_bytes} bytes")
    raw = file.read_bytes()
    if _is_binary(raw[:_SNIFF_BYTES]):
        raise FileToolError(f"{shown} is a binary file, not text")
    text = raw.decode("utf-8", errors="replace")
    count = text.count(old)
    if count == 0:
        raise FileToolError(f"old_string was not found in {shown}: copy it exactly, whitespace too")
    if count > 1 and not replace_all:
        raise FileToolError(
            f"old_string appears {count} times in {shown}: include more surrounding text so it "
            "is unique, or set replace_all to replace every occurrence"
        )
    write_text_atomically(file, text.replace(old, new))
    return f"Replaced {count} occurrence{'s' if count > 1 else ''} in {shown}"


def _check_pattern(pattern: str) -> None:
    parts = PurePosixPath(pattern).parts
    if not pattern or pattern.startswith("/") or ".." in parts:
        raise FileToolError(
            f"{pattern!r} is not a pattern inside the workspace: use a relative pattern "
            "without '..', such as '**/*.py'"
        )


def glob(root: ConfinedRoot, pattern: str, path: str, limits: FileLimits) -> str:
    """Paths matching `pattern` under `path`, sorted; links out of the root are left out."""
    _check_pattern(pattern)
    base = _found(root, path)
    if not base.is_dir():
        raise FileToolError(f"{path!r} is a file, not a folder")
    found: list[str] = []
    cap = limits.max_entries
    for match in base.glob(pattern):
        if not root.inside(match):
            continue
        shown = root.show(match.parent.resolve() / match.name)
        found.append(shown + "/" if match.is_dir() else shown)
        if len(found) > cap * 10:
            break
    if not found:
        return f"No paths match {pattern!r}."
    found.sort()
    extra = f"\n[{len(found) - cap} more matches not shown]" if len(found) > cap else ""
    return "\n".join(found[:cap]) + extra


def _files(root: ConfinedRoot, base: Path) -> Iterator[Path]:
    if not base.is_dir():
        yield base
        return
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            yield Path(folder) / name


def grep(
    root: ConfinedRoot,
    pattern: str,
    path: str,
    include: str,
    ignore_case: bool,
    limits: FileLimits,
) -> str:
    """``path:line: text`` for each line matching the regex (RE2 syntax: linear time)."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        regex = re2.compile(pattern, options)
    except re2.error as exc:
        raise FileToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    base = _found(root, path)
    out: list[str] = []
    for file in _files(root, base):
        shown = root.show(file.parent.resolve() / file.name) if root.inside(file) else ""
        if not shown or (include and not PurePosixPath(shown).match(include)):
            continue
        try:
            if not file.is_file() or file.stat().st_size > limits.max_file_bytes:
                continue
            raw = file.read_bytes()
        except OSError:
            continue
        if _is_binary(raw[:_SNIFF_BYTES]):
            continue
        for number, text in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(text):
                out.append(f"{shown}:{number}: {_line(text, limits.max_line_chars)}")
                if len(out) == limits.max_entries:
                    out.append(f"[stopped at {limits.max_entries} matches: narrow the search]")
                    return "\n".join(out)
    return "\n".join(out) if out else f"No lines match {pattern!r}."
