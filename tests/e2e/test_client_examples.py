"""The A2A and MCP pages' client examples, run as written against `hookmesh up` (the demo
model) on the default ports: each Python and curl example prints what the page says it
prints, a few readable lines."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from tests.e2e.commands import DEADLINE, ROOT, start_up

pytestmark = pytest.mark.timeout(240)

PAGES = [ROOT / "docs" / "services" / "a2a.md", ROOT / "docs" / "services" / "mcp.md"]


def examples(page: Path) -> list[tuple[str, str, str]]:
    """(language, code, printed) of each example of the page's "Calling it" section: a code
    block followed by the ```text block of its output."""
    section = page.read_text().split("## Calling it", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"```(python|sh)\n(.*?)```\s*```text\n(.*?)```", section, flags=re.S)
    assert len(pairs) == 2, f"{page.name}: a Python and a curl example, each with its output"
    return pairs


async def _run(language: str, code: str, cwd: Path) -> tuple[int, str, str]:
    argv = (sys.executable, "-c", code) if language == "python" else ("bash", "-c", code)
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd
    )
    async with asyncio.timeout(DEADLINE):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_a2a_and_mcp_client_examples_print_what_their_pages_say(tmp_path: Path) -> None:
    suite = await start_up(cwd=tmp_path)
    try:
        for page in PAGES:
            for language, code, printed in examples(page):
                code_, out, err = await _run(language, code, tmp_path)
                assert (code_, out) == (0, printed), f"{page.name} {language}: {err}"
    finally:
        code, log = await suite.stop()
    assert code == 0, log
