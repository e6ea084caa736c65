"""docs/deploy.md as a new user runs it: the one command of section 1 with the commands of a
second terminal, and every block of section 2 in order, word for word. Each runs in a network
namespace of its own (the doc's fixed loopback ports meet no other test there), in a folder
holding the checkout's files, with the virtualenv's commands first on the PATH."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from tests.e2e.commands import ROOT

pytestmark = pytest.mark.timeout(300)

DOC = (ROOT / "docs" / "deploy.md").read_text()


def _blocks(heading: str) -> list[str]:
    """The ``sh`` blocks of the section whose heading starts with `heading`."""
    section = DOC.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


async def _in_own_network(script: str, folder: Path) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of bash running `script` (strict mode) in `folder`, in a
    new network namespace whose loopback is up."""
    (folder / "deploy").symlink_to(ROOT / "deploy")
    (folder / "run.sh").write_text(f"set -euo pipefail\nip link set lo up\n{script}")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    process = await asyncio.create_subprocess_exec(
        "unshare", "--net", "bash", "run.sh", cwd=folder, env={**os.environ, "PATH": path,
        "COLUMNS": "200"}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(240):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_section_1_one_command_and_a_second_terminal(tmp_path: Path) -> None:
    up, terminal = _blocks("1.")
    code, out, err = await _in_own_network(
        f"{up.split('#')[0].strip()} >up.out 2>up.err &\nsuite=$!\n{terminal}"
        "kill -INT $suite\nwait $suite\n",
        tmp_path,
    )
    printed = (tmp_path / "up.out").read_text()
    assert code == 0, f"{out}\n{err}\n{printed}\n{(tmp_path / 'up.err').read_text()}"
    assert "envoy in front of 2 replicas" in printed and "replica-2" in printed
    assert not re.search(r"^\S.* (down|not serving)", out, flags=re.M), out
    sessions = re.findall(r"session (\w+)", out)
    assert len(sessions) == 2 and out.count("end: completed") == 2
    assert all(s in out.split("end: completed")[-1] for s in sessions)  # listed after


async def test_section_2_each_piece_by_hand(tmp_path: Path) -> None:
    code, out, err = await _in_own_network("".join(_blocks("2.")), tmp_path)
    assert code == 0, f"{out}\n{err}"
    assert out.count("serving") == 3 and "end: completed" in out
    (session,) = re.findall(r"session (\w+)", out)
    assert re.search(rf"^{session} ", out, flags=re.M)  # listed by the other replica
    assert out.count("generation 2:") == 2  # both replicas reloaded
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()  # the database stopped
