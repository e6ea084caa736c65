"""Tools: schemas from type hints, argument validation, errors, streaming and concurrency."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest

from hookmesh.agent import Agent, ToolArgumentError, Toolkit, tool
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import ImageBlock, InlineSource, MessageKind, tool_results
from tests.agent_helpers import SHORT_TIMEOUT, collect, echo

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["flat", "agentic"])
def kind(request: pytest.FixtureRequest) -> MessageKind:
    return request.param  # type: ignore[no-any-return]


@tool(read_only=True, concurrency_safe=True)
def search(query: str, limit: int = 3, mode: Literal["fast", "deep"] = "fast") -> list[str]:
    """Search the notes.

    Longer explanation that the model also reads.

    Args:
        query: Words to look for.
        limit: How many hits at most.
        mode: Speed or depth.
    """
    return [f"{query}:{i}:{mode}" for i in range(limit)]


def test_schema_and_flags_come_from_the_function() -> None:
    assert search.name == "search"
    assert (
        search.description == "Search the notes.\n\nLonger explanation that the model also reads."
    )
    assert search.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "default": 3, "description": "How many hits at most."},
            "mode": {
                "enum": ["fast", "deep"],
                "type": "string",
                "default": "fast",
                "description": "Speed or depth.",
            },
        },
        "required": ["query"],
    }
    assert (search.read_only, search.concurrency_safe, search.return_directly) == (
        True,
        True,
        False,
    )
    assert search.definition()["name"] == "search"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "arguments are not valid JSON"),
        ("[1, 2]", "arguments must be a JSON object, got list"),
        ("null", "arguments must be a JSON object, got NoneType"),
        ("5", "arguments must be a JSON object, got int"),
        ('"text"', "arguments must be a JSON object, got str"),
        ('{"limit": 2}', "query: Field required"),
        ('{"query": "x", "limit": "many"}', "limit: Input should be a valid integer"),
        ('{"query": "x", "mode": "slow"}', "mode: Input should be 'fast' or 'deep'"),
        ('{"query": "x", "extra": 1}', "extra: Extra inputs are not permitted"),
    ],
)
def test_invalid_arguments_are_reported_precisely(arguments: str, message: str) -> None:
    with pytest.raises(ToolArgumentError) as exc:
        search.parse_arguments(arguments)
    assert message in str(exc.value)


def test_valid_arguments_get_defaults() -> None:
    assert search.parse_arguments('{"query": "x"}') == {"query": "x", "limit": 3, "mode": "fast"}
    assert echo.parse_arguments('{"text": "t"}') == {"text": "t"}


def test_toolkit_rejects_duplicate_names() -> None:
    kit = Toolkit([echo])
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        kit.add(echo)


def test_star_args_cannot_be_tools() -> None:
    def bad(*args: int) -> None: ...

    with pytest.raises(TypeError, match="cannot be described"):
        tool(bad)


async def run_calls(
    kind: MessageKind, calls: list[tuple[str, Any]], tools: list[Any]
) -> tuple[Agent, list[Any]]:
    model = ScriptedChatModel([ScriptedTurn(tool_calls=calls), "done"])
    agent = Agent(model, kind=kind, tools=tools)
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"
    return agent, [r for m in agent.state.context for r in tool_results(m)]


async def test_bad_arguments_unknown_tools_and_raising_tools_become_error_results(
    kind: MessageKind,
) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise OSError("disk on fire")

    calls = [
        ("search", "{oops"),
        ("search", {"limit": 1}),
        ("nope", {}),
        ("explode", {}),
        ("search", {"query": "q", "limit": 1}),
    ]
    agent, results = await run_calls(kind, calls, [search, explode])
    assert [r.state for r in results] == ["error", "error", "error", "error", "success"]
    assert "not valid JSON" in results[0].text
    assert "query: Field required" in results[1].text
    assert "there is no tool named 'nope' (tools: search, explode)" in results[2].text
    assert results[3].text == "Error: OSError: disk on fire"
    assert results[4].text == '["q:0:fast"]'
    # The model saw every result in its next call.
    assert agent.model.calls == 2  # type: ignore[attr-defined]


async def test_sync_tools_run_off_the_event_loop_thread(kind: MessageKind) -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> str:
        """Report the thread."""
        return "worker" if threading.get_ident() != loop_thread else "loop"

    _, results = await run_calls(kind, [("where", {})], [where])
    assert results[0].text == "worker"


async def test_async_generator_tools_stream_text_and_media(kind: MessageKind) -> None:
    png = ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))

    @tool
    async def progress() -> AsyncIterator[Any]:
        """Report progress."""
        yield "step 1, "
        yield "step 2"
        yield png
        yield {"done": True}

    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("progress", {})]), "ok"])
    agent = Agent(model, kind=kind, tools=[progress])
    events = await collect(agent.reply("go"))
    deltas = [e for e in events if e.type == "tool_result_delta"]
    assert [d.text for d in deltas] == ["step 1, ", "step 2", "", '{"done": true}']  # type: ignore[union-attr]
    assert deltas[2].media == png  # type: ignore[union-attr]
    result = next(r for m in agent.state.context for r in tool_results(m))
    assert [b.type for b in result.output] == ["text", "image", "text"]
    assert result.output[0].text == "step 1, step 2"  # type: ignore[union-attr]


async def test_concurrency_safe_calls_run_together(kind: MessageKind) -> None:
    ping, pong = asyncio.Event(), asyncio.Event()

    @tool(concurrency_safe=True)
    async def first() -> str:
        """Needs second to be running."""
        ping.set()
        await pong.wait()
        return "first"

    @tool(concurrency_safe=True)
    async def second() -> str:
        """Needs first to be running."""
        pong.set()
        await ping.wait()
        return "second"

    async with asyncio.timeout(SHORT_TIMEOUT):
        _, results = await run_calls(kind, [("first", {}), ("second", {})], [first, second])
    # Both finished, so they ran concurrently; results stay in call order.
    assert [r.text for r in results] == ["first", "second"]


async def test_unsafe_calls_run_one_after_another(kind: MessageKind) -> None:
    running: list[str] = []

    @tool
    async def step(name: str) -> str:
        """Record overlap."""
        running.append(name)
        overlap = len(running)
        await asyncio.sleep(0)
        running.remove(name)
        return f"{name}:{overlap}"

    model = ScriptedChatModel(
        [ScriptedTurn(tool_calls=[("step", {"name": "a"}), ("step", {"name": "b"})]), "ok"]
    )
    agent = Agent(model, kind=kind, tools=[step])
    events = await collect(agent.reply("go"))
    order = [
        (e.type, e.call_id) for e in events if e.type in ("tool_result_start", "tool_result_end")
    ]  # type: ignore[union-attr]
    assert order == [
        ("tool_result_start", "call_1"),
        ("tool_result_end", "call_1"),
        ("tool_result_start", "call_2"),
        ("tool_result_end", "call_2"),
    ]
    results = [r.text for m in agent.state.context for r in tool_results(m)]
    assert results == ["a:1", "b:1"]
