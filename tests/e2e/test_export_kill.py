"""`hookmesh admin export` when the agent service dies under it: the server is SIGKILLed
while the export's call is open, and the CLI says so in one error line and leaves neither
the file nor its partial copy behind (a half export must never pass for a whole one)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
import yaml

from hookmesh.client import AgentClient
from hookmesh.testing import agent_process
from tests.cut_proxy import cut_proxy
from tests.e2e.commands import run

pytestmark = pytest.mark.timeout(120)

SHORT = 20.0


async def test_an_agent_killed_during_an_export_leaves_no_file(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    store = f"sqlite:///{tmp_path}/agent.db"
    config.write_text(yaml.safe_dump({"store": store, "admin_principals": ["anonymous"]}))
    folder = tmp_path / "out"
    folder.mkdir()
    output = folder / "export.jsonl"
    async with agent_process(config) as agent:
        async with AgentClient(agent.address, timeout=SHORT) as client:
            [e async for e in client.reply("hello", session_id="s1")]
        async with cut_proxy(agent.address) as proxy:
            os.kill(agent.pid, signal.SIGSTOP)  # the call opens and waits on a frozen server
            exporting = asyncio.create_task(
                run("admin", "export", "--user", "anonymous", "-o", str(output),
                    "--target", proxy.address, "--timeout", "60")
            )  # fmt: skip
            async with asyncio.timeout(SHORT):
                await proxy.accepted.wait()
            await agent.kill()
            code, out, err = await exporting
    assert code == 1
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "exported" not in out
    assert os.listdir(folder) == []  # neither the export nor its partial copy
