"""Writing a text file so that no reader ever sees half of it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through a temporary file in the same folder and a
    rename: a reader sees the old file or the new one, never a mix, and a link at `path`
    is replaced itself, never its target. The file is readable by its owner only.

    Blocking: call it in a worker thread. Parent folders are created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
