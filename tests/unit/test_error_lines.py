"""The CLI's failure lines: one mapping in Python, and chat.js's copy of its ways out in step."""

from __future__ import annotations

import re
from pathlib import Path

import grpc

from hookmesh.cli._errors import _WAYS_OUT, Callee, failure_line
from hookmesh.client import AgentClientError
from hookmesh.errors import FieldViolation

NODE_FAILURE = Path(__file__).parents[2] / "clients" / "node" / "lib" / "failure.js"


def test_chat_js_says_what_to_do_next_in_the_same_words() -> None:
    table = NODE_FAILURE.read_text().split("const WAYS_OUT = {", 1)[1].split("};", 1)[0]
    node = {k: v for k, _, v in re.findall(r"(\w+): (['\"])(.*?)\2,", table)}
    assert node, "no table found in failure.js"
    assert {k: _WAYS_OUT[k] for k in node} == node


async def test_a_violation_the_message_lacks_is_added_once_and_a_refusal_exits_2() -> None:
    error = AgentClientError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "top_k: an integer 1-50; got 100",
        "INVALID_SCHEMA",
        [FieldViolation("top_k", "an integer 1-50; got 100"), FieldViolation("mode", "bad")],
    )
    assert await failure_line(error, Callee("127.0.0.1:1", "retrieval")) == (
        "error: top_k: an integer 1-50; got 100; mode: bad [INVALID_SCHEMA]",
        2,
    )


async def test_an_error_without_a_reason_keeps_its_code() -> None:
    error = AgentClientError(grpc.StatusCode.PERMISSION_DENIED, "not yours")
    assert await failure_line(error, Callee("127.0.0.1:1", "agent")) == (
        "error: PERMISSION_DENIED: not yours",
        1,
    )
