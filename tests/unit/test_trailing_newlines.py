"""Ids and names are checked whole: Python's `$` also matches before a final newline, so a
`^…$` pattern with `match` let ``"alice\n"`` through as a user, a session id or a name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hookmesh.errors import HookmeshError
from hookmesh.memory._limits import check_user_and_id
from hookmesh.retrieval._limits import check_knowledge_base_name
from hookmesh.services.agent._forget import check_user
from hookmesh.services.agent._servicer import _check_id

CHECKS: list[tuple[str, Callable[[str], Any], str]] = [
    ("session id", _check_id, "s-1"),
    ("user to forget", check_user, "alice"),
    ("knowledge base", check_knowledge_base_name, "handbook"),
    ("memory id", lambda v: check_user_and_id("alice", v), "0123456789abcdef" * 2),
]


@pytest.mark.parametrize(("what", "check", "good"), CHECKS, ids=[c[0] for c in CHECKS])
def test_a_final_newline_is_refused(what: str, check: Callable[[str], Any], good: str) -> None:
    check(good)
    with pytest.raises(HookmeshError):
        check(good + "\n")
