"""Parts of the team replica tests that agent processes import (`tests.team_app:X`): a
supervisor whose worker asks the user to confirm a call, and tools that say which process ran
them (one ``<what> <pid>`` line each, appended to the file ``TEAM_RUNS`` names)."""

from __future__ import annotations

import os

from hookmesh.middleware.builtin.supervisor import SupervisorMiddleware, Worker
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.tools import tool

RUNS_ENV = "TEAM_RUNS"
"""The variable naming the file the tools append to."""


def _note(line: str) -> None:
    with open(os.environ[RUNS_ENV], "a") as log:
        log.write(f"{line} {os.getpid()}\n")


@tool
def where() -> str:
    """Say which process runs this reply."""
    _note("replied")
    return "noted"


@tool(needs_confirmation=True)
def wipe(target: str) -> str:
    """Wipe `target`, once the user confirmed it.

    Args:
        target: What to wipe.
    """
    _note(f"wiped {target}")
    return f"wiped {target}"


def ops_team() -> SupervisorMiddleware:
    """A supervisor of one worker, ``ops``, whose first step is a call of `wipe` (it needs
    confirmation) and whose answer after it is ``The ops worker is done.``; its script plays
    by position, so a replica that resumes it from the session goes on where it paused."""
    model = ScriptedChatModel(
        [ScriptedTurn(tool_calls=[("wipe", {"target": "cache"})]), "The ops worker is done."],
        per_reply=True,
    )
    return SupervisorMiddleware([Worker("ops", model, "Runs operations.", tools=[wipe])])


def runs(path: str) -> list[tuple[str, int]]:
    """The lines the tools wrote: what, and the process id that did it."""
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [(what, int(pid)) for what, _, pid in (ln.strip().rpartition(" ") for ln in log)]
