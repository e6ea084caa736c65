"""`make` notices a venv built for another checkout (copied with `cp -a`: its editable
install imports the other tree's src/) and builds one for this tree; a venv of this tree is
kept. `make -n` shows what it would run; the check itself runs as make reads the Makefile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _checkout(tmp_path: Path, imports_from: str) -> Path:
    """A checkout with the Makefile and a built venv whose python finds hookmesh at
    `imports_from` (a stand-in interpreter: only its answer matters to make)."""
    tree = tmp_path / "tree"
    (tree / "src" / "hookmesh").mkdir(parents=True)
    (tree / "src" / "hookmesh" / "__init__.py").write_text("")
    shutil.copy(ROOT / "Makefile", tree)
    shutil.copy(ROOT / "pyproject.toml", tree)
    shutil.copytree(ROOT / "scripts", tree / "scripts")
    bin_dir = tree / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho {imports_from}\n")
    python.chmod(0o755)
    (tree / ".venv" / ".installed").touch()  # newer than pyproject.toml: "built"
    return tree


def _make_n(tree: Path) -> str:
    # Run as a user would: not as a sub-make of `make test` (whose MAKELEVEL and MAKEFLAGS
    # would add "Entering directory" lines and pass on the outer make's flags).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(
        ["make", "-n", "demo"], cwd=tree, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_venv_of_another_tree_is_rebuilt(tmp_path: Path) -> None:
    tree = _checkout(tmp_path, "/elsewhere/src/hookmesh/__init__.py")
    out = _make_n(tree)
    assert out.splitlines()[0] == (
        ".venv runs /elsewhere/src/hookmesh/__init__.py, not this tree's: rebuilding it"
    )
    assert "python3 -m venv .venv" in out and "pip install --quiet -e '.[dev]'" in out
    assert not (tree / ".venv").exists()


def test_a_venv_of_this_tree_is_kept(tmp_path: Path) -> None:
    tree = _checkout(tmp_path, "")
    python = tree / ".venv" / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho {tree / 'src' / 'hookmesh' / '__init__.py'}\n")
    assert _make_n(tree).splitlines() == [".venv/bin/hookmesh demo "]
    assert (tree / ".venv" / ".installed").exists()
