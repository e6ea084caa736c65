"""`hookmesh status` shows a sidecar the agent skips: its circuit opened after it hung."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml

from hookmesh.client import AgentClient
from hookmesh.services.agent import load_config, start_agent_service
from tests.e2e.commands import run
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)


async def test_status_reports_a_hung_sidecars_open_circuit(tmp_path: Path) -> None:
    async with sidecar_process("tests.remote_middlewares:Passer") as sidecar:
        settings = {
            "store": f"sqlite:///{tmp_path}/agent.db",
            "middlewares": [
                {"type": "remote", "sidecar": "hung", "failure_mode": "fail_open", "timeout": 0.3}
            ],
            "sidecars": [
                {
                    "name": "hung",
                    "middleware": "tests.remote_middlewares:Passer",
                    "listen": sidecar.address,
                }
            ],
        }
        service = await start_agent_service(
            load_config(None, **settings),
            address="127.0.0.1:0",
            sidecars={"hung": sidecar.address},
        )
        config = tmp_path / "suite.yaml"
        config.write_text(yaml.safe_dump({**settings, "listen": f"127.0.0.1:{service.port}"}))
        os.kill(sidecar.pid, signal.SIGSTOP)
        try:
            async with AgentClient(f"127.0.0.1:{service.port}", timeout=30) as client:
                for n in range(3):  # three missed deadlines in a row open the circuit
                    await client.text(f"hello {n}")
            code, out, err = await run("status", "--config", str(config), "--timeout", "1")
        finally:
            os.kill(sidecar.pid, signal.SIGCONT)
            await service.stop(None)
    [agent] = [line for line in out.splitlines() if line.startswith("agent ")]
    [hung] = [line for line in out.splitlines() if line.startswith("sidecar hung ")]
    assert agent.endswith(" serving"), out
    assert hung.endswith("; the agent skips it (circuit open)"), out
    assert code == 1, err
