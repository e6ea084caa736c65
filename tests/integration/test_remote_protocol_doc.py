"""The minimal sidecar of docs/remote-protocol.md runs as written, against a real agent."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import MessageKind
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs

pytestmark = pytest.mark.timeout(60)

DOC = Path(__file__).resolve().parents[2] / "docs" / "remote-protocol.md"


async def test_the_minimal_sidecar_counts_each_replys_events(
    kind: MessageKind, tmp_path: Path
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    script = tmp_path / "event_counter.py"
    script.write_text(blocks[0])
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "127.0.0.1:0", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(SHORT_TIMEOUT):
            line = (await process.stdout.readline()).decode().strip()
        assert line.startswith("listening on "), line
        remote = await RemoteMiddleware.connect(line.removeprefix("listening on "), timeout=5)
        try:
            model = ScriptedChatModel(["counted answer"], stream=True, chunk_size=4)
            agent = Agent(model, kind=kind, middlewares=[remote])
            events = await collect(agent.reply("go"))
        finally:
            await remote.aclose()
    finally:
        process.kill()
        await process.wait()
    assert remote.failure_mode == "fail_open"
    [report] = [e for e in customs(events) if e.name == "event-counter"]
    assert events[-1].type == "reply_end"
    assert events[-2] is report
    assert report.reply_id == events[0].reply_id
    assert report.value == len(events) - 2
