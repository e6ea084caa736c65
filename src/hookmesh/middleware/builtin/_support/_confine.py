"""Confining untrusted paths to a root directory: one rule for every built-in that reads or
writes files named by a model or a file (filesystem tools, skills, AGENTS.md imports, the
reduction offload store)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path


class PathEscapeError(ValueError):
    """A path would leave its root (``..``, an absolute path elsewhere, a symlink out)."""


class ConfinedRoot:
    """A directory inside which untrusted paths are resolved.

    The rule: a path is joined to the root (an absolute path replaces it), every symlink
    is resolved, and the result must lie inside the resolved root. So ``../x``,
    ``/etc/passwd`` and a symlink pointing out of the root are refused, while ``a/../b``
    or a symlink to another place inside the root are fine. The check is made when the
    path is resolved: a concurrent process that swaps a directory for a symlink between
    the check and the use is not defended against (run untrusted code elsewhere).

    Args:
        root: The directory (resolved once, here).
        label: How errors name it (``the workspace``); never its real path.
    """

    __slots__ = ("label", "root")

    def __init__(self, root: str | os.PathLike[str], label: str = "its folder") -> None:
        if not isinstance(root, str | os.PathLike) or not str(root):
            raise ValueError(f"root must be a directory path, not {root!r}")
        self.root = Path(root).resolve()
        self.label = label

    def resolve(self, path: str | os.PathLike[str], *, allow_root: bool = True) -> Path:
        """The real path of `path` (relative to the root) when it lies inside the root.

        Raises:
            PathEscapeError: It lies outside, is the root itself while `allow_root` is
                false, or holds a NUL character.
        """
        text = os.fspath(path)
        if "\0" in text:
            raise PathEscapeError("a path must not contain a NUL character")
        resolved = (self.root / text).resolve()
        if resolved == self.root:
            if allow_root:
                return resolved
        elif resolved.is_relative_to(self.root):
            return resolved
        raise PathEscapeError(f"{text!r} is outside {self.label}")

    def inside(self, path: Path) -> bool:
        """Whether `path` (absolute, symlinks resolved or not) really lies inside the root."""
        try:
            self.resolve(path)
        except PathEscapeError:
            return False
        return True

    def show(self, path: Path) -> str:
        """`path` (inside the root) as the model sees it: relative, with ``/``; ``.`` for
        the root."""
        return path.relative_to(self.root).as_posix()

    def sub(self, path: str | os.PathLike[str], label: str) -> ConfinedRoot:
        """A root for a directory inside this one (e.g. one skill's folder).

        Raises:
            PathEscapeError: `path` lies outside this root.
        """
        return ConfinedRoot(self.resolve(path), label)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 96


def safe_name(raw: str, max_chars: int = _MAX_NAME) -> str:
    """A file-name component for an untrusted string (a tool call id): only ``[A-Za-z0-9_.-]``,
    no leading dot, at most `max_chars` characters. Strings that had to change get a hash of
    the original appended, so distinct ids never share a name."""
    cleaned = _UNSAFE.sub("_", raw).lstrip(".")
    if cleaned == raw and 0 < len(raw) <= max_chars:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stem = cleaned[: max_chars - len(digest) - 1] or "id"
    return f"{stem}-{digest}"
