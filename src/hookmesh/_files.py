"""Data files that only their owner can read: folders 0700, files 0600."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def private_folder(path: Path) -> None:
    """Create `path` (and parents) if missing; a folder this creates is 0700."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700, exist_ok=True)


def private_file(path: Path) -> None:
    """Create `path` empty if missing and make it 0600 (before a database opens it, so its
    journal files, which SQLite creates with the database's mode, are private too)."""
    private_folder(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    with contextlib.suppress(PermissionError):  # someone else's file: leave its mode alone
        path.chmod(0o600)
