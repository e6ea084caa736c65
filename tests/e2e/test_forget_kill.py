"""`ForgetUser` when the agent service dies in the middle of an erasure: the agent is
SIGKILLed while it waits on the memory service (the last store it erases), after its own
session store was erased. What was erased stays erased, what was not is still there, and a
second `hookmesh admin forget` on a restarted agent erases the rest, its receipt counting
only that."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import pytest
import yaml

from hookmesh.client import AgentClient, MemoryClient
from hookmesh.memory import MemoryScope, knowledge_base_of
from hookmesh.testing import agent_process, hookmesh_process
from tests.cut_proxy import cut_proxy
from tests.e2e.commands import run

pytestmark = pytest.mark.timeout(180)

SHORT = 20.0
USER = "anonymous"
"""The principal of a caller without credentials: the owner of what the test makes."""


def _held(tmp_path: Path) -> tuple[int, int]:
    """The user's sessions in the agent's database and memories in the memory service's."""
    with sqlite3.connect(tmp_path / "agent.db") as db:
        (sessions,) = db.execute(
            "SELECT count(*) FROM agent_sessions WHERE owner = ?", (USER,)
        ).fetchone()
    with sqlite3.connect(tmp_path / "memory.db") as db:
        (memories,) = db.execute(
            "SELECT count(*) FROM documents d JOIN knowledge_bases k ON d.kb_id = k.id"
            " WHERE k.name = ?",
            (knowledge_base_of(USER),),
        ).fetchone()
    return int(sessions), int(memories)


async def test_an_agent_killed_mid_erasure_keeps_what_it_erased_and_a_second_forget_ends_it(
    tmp_path: Path,
) -> None:
    memory_config = tmp_path / "memory.yaml"
    memory_config.write_text(yaml.safe_dump({"store": f"sqlite:///{tmp_path}/memory.db"}))
    async with hookmesh_process(
        "serve", "memory", "--config", str(memory_config), "--listen", "127.0.0.1:0",
        ready="memory service listening on ",
    ) as memory, cut_proxy(memory.address) as proxy:  # fmt: skip
        async with MemoryClient(memory.address, timeout=SHORT) as client:
            await client.add(MemoryScope(user_id=USER), facts=["The user owns a kayak."])
        config = tmp_path / "agent.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "store": f"sqlite:///{tmp_path}/agent.db",
                    "admin_principals": [USER],
                    "erasure": {"memory": proxy.address},
                }
            )
        )
        async with agent_process(config) as agent:
            async with AgentClient(agent.address, timeout=SHORT) as client:
                for session in ("s1", "s2"):
                    [e async for e in client.reply("hello", session_id=session)]
            assert _held(tmp_path) == (2, 1)
            os.kill(memory.pid, signal.SIGSTOP)  # the memory step waits on a frozen service
            forgetting = asyncio.create_task(
                run("admin", "forget", "--user", USER, "--target", agent.address)
            )
            async with asyncio.timeout(SHORT):
                await proxy.accepted.wait()  # the agent reached its last store
            await agent.kill()
            code, _, err = await forgetting
        assert code == 1 and err.startswith("error: ") and "Traceback" not in err, err
        assert _held(tmp_path) == (0, 1)  # its own store erased, the memory not yet
        os.kill(memory.pid, signal.SIGCONT)
        async with agent_process(config) as agent:
            code, out, err = await run("admin", "forget", "--user", USER, "--target", agent.address)
    assert code == 0, err
    assert "agent.sessions: 0 deleted" in out and "memory.memories: 1 deleted" in out, out
    assert _held(tmp_path) == (0, 0)
