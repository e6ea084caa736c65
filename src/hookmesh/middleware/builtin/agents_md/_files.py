"""Reading AGENTS.md files with their ``@path`` imports: depth-limited, confined to a root,
within a total byte cap, with a warning for everything left out (blocking: run in a thread)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hookmesh.middleware.builtin._support._confine import ConfinedRoot, PathEscapeError

_IMPORT = re.compile(r"(?:^|(?<=\s))@([A-Za-z0-9_.~/-][^\s`'\"()<>\[\]]*)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_TRAILING = ".,;:!?"


@dataclass(slots=True)
class Loaded:
    """What was read: one section per file, in reading order, and what was left out."""

    sections: list[tuple[str, str, str]] = field(default_factory=list)
    """``(path, imported_by, text)``; `imported_by` is empty for a configured file."""
    warnings: list[str] = field(default_factory=list)
    """One line per import or file not loaded, or cut."""
    used: int = 0
    """Bytes of text included so far."""


def imports_of(text: str) -> list[str]:
    """The ``@path`` imports of `text`, in order: a token starting with ``@`` at a line start
    or after a space, outside fenced code blocks and inline code spans."""
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub("", line)):
            path = match.group(1).rstrip(_TRAILING)
            if path and path not in found:
                found.append(path)
    return found


class AgentsFiles:
    """Loads the configured files and their imports under `root`.

    Args:
        root: Every file and import must lie inside it.
        files: The configured files, relative to the root, in order.
        max_bytes: Total bytes of text included.
        max_depth: Levels of imports followed (a configured file is level 0).
    """

    def __init__(self, root: ConfinedRoot, files: list[str], max_bytes: int, max_depth: int):
        self.root = root
        self.files = files
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    def load(self) -> Loaded:
        """Read everything now."""
        out = Loaded()
        seen: set[Path] = set()
        for file in self.files:
            self._visit(file, self.root.root, "", 0, out, seen)
        return out

    def _visit(
        self, name: str, base: Path, parent: str, depth: int, out: Loaded, seen: set[Path]
    ) -> None:
        what = f"{parent} imports @{name}, which" if parent else f"{name}"
        try:
            path = self.root.resolve(base / name)
        except PathEscapeError:
            out.warnings.append(f"{what} is outside the AGENTS.md root: not loaded")
            return
        if path in seen:
            return
        if not path.is_file():
            out.warnings.append(f"{what} does not exist: not loaded")
            return
        seen.add(path)
        shown = self.root.show(path)
        room = self.max_bytes - out.used
        if room <= 0:
            out.warnings.append(
                f"{shown} left out: the AGENTS.md content is over {self.max_bytes} bytes"
            )
            return
        raw = path.read_bytes()
        if len(raw) > room:
            raw = raw[:room]
            out.warnings.append(
                f"{shown} cut: the AGENTS.md content is over {self.max_bytes} bytes"
            )
        text = raw.decode("utf-8", errors="ignore").strip()
        out.used += len(raw)
        out.sections.append((shown, parent, text))
        children = imports_of(text)
        if children and depth == self.max_depth:
            out.warnings.append(
                f"{shown} imports {', '.join('@' + c for c in children)}: imports nest deeper "
                f"than {self.max_depth} levels, not loaded"
            )
            return
        for child in children:
            self._visit(child, path.parent, shown, depth + 1, out, seen)
