"""Parts of the durable-reply tests that agent processes import (`tests.durable_app:X`): a
tool with a side effect it makes once per idempotency key, counted in a file the test reads.

Every run appends ``run <key>`` to the file named by ``DURABLE_EFFECTS``; the first run of a
key appends ``effect <key>`` too. A test then knows how often each call ran and how often it
took effect, whatever happened to the processes.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from typing import Any

from hookmesh.tools import ToolContext, tool
from tests.mesh_app import GATE_ENV, wait_at_gate

EFFECTS_ENV = "DURABLE_EFFECTS"
"""The variable naming the effects file."""
ANSWER = (
    "The effect is recorded once, whatever happens to the replica that runs it: "
    "a takeover runs the call again with the same key, and the key makes it a no-op."
)
"""The scripted answer after the tool's result (long enough to stream for a while)."""


@tool(idempotent=True)
async def record_effect(context: ToolContext[Any], note: str) -> str:
    """Record an effect, once per call.

    Args:
        note: What to record; ``park`` waits at the test's gate (``MESH_GATE``) once the
            effect is recorded, so a test can kill the process mid-run.
    """
    done = await asyncio.to_thread(_record, context.idempotency_key)
    if note == "park" and not done:
        await wait_at_gate(os.environ[GATE_ENV])
    return f"recorded {note}"


def _record(key: str) -> bool:
    """Note a run of `key`, and its effect unless one was noted; whether one was."""
    with open(os.environ[EFFECTS_ENV], "a+") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.seek(0)
        done = f"effect {key}\n" in log.read()
        log.write(f"run {key}\n")
        if not done:
            log.write(f"effect {key}\n")
    return done


def effects(path: str) -> tuple[dict[str, int], dict[str, int]]:
    """How often each key ran, and took effect."""
    runs: dict[str, int] = {}
    took: dict[str, int] = {}
    if not os.path.exists(path):
        return runs, took
    with open(path) as log:
        for line in log:
            what, _, key = line.strip().partition(" ")
            into = runs if what == "run" else took
            into[key] = into.get(key, 0) + 1
    return runs, took


def config(store: dict[str, Any], note: str = "x", **extra: Any) -> dict[str, Any]:
    """An agent config of the durable tests: a tool call, then a streamed answer, per reply."""
    return {
        **store,
        "grace_seconds": 5,
        "tools": ["tests.durable_app:record_effect"],
        "models": {
            "default": {
                "type": "scripted",
                "per_reply": True,
                "chunk_size": 4,
                "turns": [
                    {"tool_calls": [{"name": "record_effect", "arguments": {"note": note}}]},
                    ANSWER,
                ],
            }
        },
        "durability": {"takeover_seconds": 0.3},
        **extra,
    }
