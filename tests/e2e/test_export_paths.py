"""`hookmesh admin export -o FILE` answers a file it cannot write in one error line, before
any call to the service and without making folders: a missing folder, a folder given as the
file, a place no file can be made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.commands import run

pytestmark = pytest.mark.timeout(60)

NOBODY = "127.0.0.1:9"
"""The discard port: the export never gets as far as calling it."""


async def _export(output: Path) -> tuple[int, str, str]:
    return await run("admin", "export", "--user", "alice", "-o", str(output), "--target", NOBODY)


async def test_a_missing_folder_is_a_usage_error_and_is_not_made(tmp_path: Path) -> None:
    code, out, err = await _export(tmp_path / "none" / "x.jsonl")
    assert (code, out) == (2, "")
    assert err == f"error: --output: folder {tmp_path / 'none'} does not exist\n"
    assert os.listdir(tmp_path) == []


async def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    code, _, err = await _export(tmp_path)
    assert (code, err) == (2, f"error: --output: {tmp_path} is a folder\n")


async def test_a_file_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    code, _, err = await _export(Path("/proc/hookmesh-export.jsonl"))
    assert code == 1 and err.startswith("error: --output: ") and len(err.splitlines()) == 1, err
