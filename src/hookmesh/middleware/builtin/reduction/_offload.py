"""Where the reduction middleware offloads full tool output: a small store interface and a
file-system backend whose paths cannot escape their root."""

from __future__ import annotations

import asyncio
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path

from hookmesh.middleware.builtin._support._atomic import write_text_atomically
from hookmesh.middleware.builtin._support._confine import ConfinedRoot, PathEscapeError, safe_name


class OffloadStore(ABC):
    """Where offloaded tool output goes. Subclass it for another backend (object storage,
    a database); `FileStore` is the default."""

    @abstractmethod
    async def write(self, key: Sequence[str], text: str) -> str:
        """Store `text` under `key` and return its location, as shown to the model.

        `key` parts are untrusted (tool call ids come from the model): sanitise them.
        """

    @abstractmethod
    async def read(self, location: str) -> str:
        """The text stored at `location` (as `write` returned it).

        Raises:
            ValueError: `location` is not one of this store's.
            LookupError: Nothing is stored there.
        """


class FileStore(OffloadStore):
    """Offloaded output as UTF-8 files under `root_dir`: ``<root>/<part>/.../<last>.txt``.

    Every key part goes through `safe_name`, and the resolved path must stay under the
    resolved root (so ``..``, absolute ids and symlinks out of the root are refused). File
    IO runs in a worker thread. Files are deleted only by `delete_folder` (the erasure of a
    user's folder) and `expire` (retention); otherwise clean the directory yourself.
    """

    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        if not isinstance(root_dir, str | os.PathLike) or not str(root_dir):
            raise ValueError(f"root_dir must be a directory path, not {root_dir!r}")
        if "\n" in str(root_dir):
            raise ValueError("root_dir must not contain a newline")
        self._confined = ConfinedRoot(root_dir)
        self.root = self._confined.root

    def path_for(self, key: Sequence[str]) -> Path:
        """The file for `key`, guaranteed to lie under the root.

        Raises:
            ValueError: `key` is empty, or the path would leave the root (a symlink).
        """
        if not key:
            raise ValueError("an offload key needs at least one part")
        *dirs, last = (safe_name(part) for part in key)
        path = self.root.joinpath(*dirs, f"{last}.txt")
        return self._inside(path)

    def _inside(self, path: Path) -> Path:
        try:
            return self._confined.resolve(path, allow_root=False)
        except PathEscapeError:
            raise ValueError(f"{path} is not under the offload directory {self.root}") from None

    async def write(self, key: Sequence[str], text: str) -> str:
        path = self.path_for(key)
        await asyncio.to_thread(write_text_atomically, path, text)
        return str(path)

    async def read(self, location: str) -> str:
        given = Path(location)
        path = self._inside(given if given.is_absolute() else self.root / given)
        try:
            return await asyncio.to_thread(path.read_text, encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError):
            raise LookupError(f"no offloaded output at {location}") from None

    def _folder(self, part: str) -> Path:
        return self._inside(self.root / safe_name(part))

    async def delete_folder(self, part: str) -> int:
        """Delete the top-level folder `part` with everything in it; how many files went
        (0 when there is none)."""

        def delete() -> int:
            folder = self._folder(part)
            if not folder.is_dir():
                return 0
            count = sum(1 for p in folder.rglob("*") if p.is_file())
            shutil.rmtree(folder)
            return count

        return await asyncio.to_thread(delete)

    async def folder_texts(self, part: str) -> AsyncIterator[tuple[str, str]]:
        """Each file under the top-level folder `part`, in path order: (its location as
        `write` returned it, its text)."""
        folder = self._folder(part)
        files = await asyncio.to_thread(
            lambda: sorted(p for p in folder.rglob("*.txt") if p.is_file())
        )
        for path in files:
            try:
                text = await asyncio.to_thread(path.read_text, encoding="utf-8")
            except FileNotFoundError:
                continue  # deleted since the listing
            yield str(path), text

    async def expire(self, before: datetime, limit: int) -> int:
        """Delete at most `limit` offloaded files last written before `before`, oldest
        first, and the folders they leave empty; how many."""
        cutoff = before.timestamp()

        def delete() -> int:
            old = sorted(
                (mtime, path)
                for path in self.root.rglob("*.txt")
                if not path.is_symlink()
                and path.is_file()
                and (mtime := path.stat().st_mtime) < cutoff
            )[:limit]
            for _, path in old:
                path.unlink(missing_ok=True)
                folder = path.parent
                while folder != self.root and not any(folder.iterdir()):
                    folder.rmdir()
                    folder = folder.parent
            return len(old)

        if not self.root.is_dir():
            return 0
        return await asyncio.to_thread(delete)

    def top_folder(self, location: str) -> str:
        """The top-level folder under the root a location lies in ("" for a file directly
        in the root).

        Raises:
            ValueError: `location` is not under the root.
        """
        given = Path(location)
        path = self._inside(given if given.is_absolute() else self.root / given)
        parts = path.relative_to(self.root).parts
        return parts[0] if len(parts) > 1 else ""
