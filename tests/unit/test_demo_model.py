"""The demo model in a real agent, both message kinds: each intent calls its tool with the
user's words and puts the result into words; anything else gets what it can show."""

from __future__ import annotations

from typing import Any

import pytest

from hookmesh.agent import Agent, Confirmation, Resume, tool
from hookmesh.models import DEMO_HELP, DemoChatModel
from hookmesh.schema import MessageKind, make_hint, make_user_text
from hookmesh.suite.demo import delete_file, get_weather

pytestmark = pytest.mark.timeout(30)

KINDS: list[MessageKind] = ["flat", "agentic"]


@tool(read_only=True)
def search_knowledge(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: What to look for.
    """
    return (
        "[1] (handbook/remote.md) A sidecar checks the bearer token of every call. "
        "It maps the token to a principal.\n\n[2] (handbook/security.md) Tokens rotate."
    )


@tool
def add_memory(text: str) -> str:
    """Remember a fact.

    Args:
        text: The fact.
    """
    return "Remembered (memory m1)."


TOOLS = [get_weather, delete_file, search_knowledge, add_memory]


async def _reply(kind: MessageKind, text: str, **options: Any) -> tuple[str, list[Any]]:
    agent = Agent(DemoChatModel(chunk_size=5), tools=TOOLS, kind=kind)
    events = [e async for e in agent.reply(text, **options)]
    answer = "".join(e.delta for e in events if e.type == "text_block_delta")
    return answer, events


def _calls(events: list[Any]) -> list[tuple[str, str]]:
    """(tool, arguments) of each call the model made, from the streamed call events."""
    calls: dict[str, list[str]] = {}
    for e in events:
        if e.type == "tool_call_start":
            calls[e.call_id] = [e.name, ""]
        elif e.type == "tool_call_delta":
            calls[e.call_id][1] += e.delta
    return [(name, args) for name, args in calls.values()]


@pytest.mark.parametrize("kind", KINDS)
async def test_weather_is_a_tool_call_answered_in_words(kind: MessageKind) -> None:
    answer, events = await _reply(kind, "What's the weather in New York today?")
    assert _calls(events) == [("get_weather", '{"city": "New York"}')]
    assert answer == "It is 12 °C, cloudy in New York."
    asked, _ = await _reply(kind, "what's the weather like?")
    assert asked == "Which city? For example: What's the weather in Lisbon?"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_search_answers_with_the_first_passage_cited(kind: MessageKind) -> None:
    answer, events = await _reply(kind, "How does a sidecar authenticate?")
    assert _calls(events) == [("search_knowledge", '{"query": "How does a sidecar authenticate?"}')]
    assert answer == (
        "A sidecar checks the bearer token of every call. It maps the token to a principal. "
        "[1]\n\nSources: [1] handbook/remote.md, [2] handbook/security.md"
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_deletion_waits_for_the_users_confirmation(kind: MessageKind) -> None:
    agent = Agent(DemoChatModel(), tools=TOOLS, kind=kind)
    events = [e async for e in agent.reply("Please delete the file notes.txt")]
    assert _calls(events) == [("delete_file", '{"path": "notes.txt"}')]
    assert events[-1].finish_reason == "awaiting_confirmation"
    call_id = events[-2].tool_calls[0].id
    denied = Resume(confirmations=[Confirmation(call_id=call_id, confirmed=False, reason="no")])
    rest = [e async for e in agent.resume(denied)]
    answer = "".join(e.delta for e in rest if e.type == "text_block_delta")
    assert answer == "I left notes.txt alone: The user denied this call: no."


@pytest.mark.parametrize("kind", KINDS)
async def test_remembering_keeps_the_users_words_and_recall_reads_the_memory_hint(
    kind: MessageKind,
) -> None:
    answer, events = await _reply(kind, "Remember that I prefer green tea")
    assert _calls(events) == [("add_memory", '{"text": "I prefer green tea."}')]
    assert answer == "I will remember that: I prefer green tea."

    hint = make_hint(kind, "Memories:\n- The user prefers green tea.", "memory", id="h1")
    question = make_user_text(kind, "What do I like to drink?")
    recalled, events = await _reply(kind, [hint, question])  # type: ignore[arg-type]
    assert _calls(events) == []
    assert recalled == "You told me: The user prefers green tea."


@pytest.mark.parametrize("kind", KINDS)
async def test_speech_help_and_no_tools(kind: MessageKind) -> None:
    assert (await _reply(kind, "Say good morning out loud"))[0] == "Good morning."
    assert (await _reply(kind, "Hello, what can you do?"))[0] == DEMO_HELP
    answer, events = await _reply(kind, "Weather in Oslo?", tool_choice="none")
    assert _calls(events) == []
    assert answer == "I was asked to answer without tools; I would call get_weather."


async def test_a_tool_the_agent_lacks_is_named() -> None:
    agent = Agent(DemoChatModel(), tools=[get_weather])
    answer = "".join(
        [
            e.delta
            async for e in agent.reply("remember that I like jazz")
            if e.type == "text_block_delta"
        ]
    )
    assert answer == "This agent offers no add_memory tool; `hookmesh up` starts one that does."


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 60},
        "city": {"$ref": "#/$defs/City"},
        "tags": {"type": "array", "items": {"enum": ["rain", "sun"]}, "minItems": 2},
        "temp_c": {"type": "integer", "minimum": -40},
        "note": {"type": "string"},
    },
    "required": ["summary", "city", "tags", "temp_c"],
    "$defs": {"City": {"anyOf": [{"type": "string", "minLength": 3}, {"type": "null"}]}},
}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_schema_given_gets_a_typed_answer_after_the_tool(kind: MessageKind) -> None:
    _, events = await _reply(kind, "What's the weather in Oslo?", output=WEATHER_SCHEMA)
    end = events[-1]
    assert [name for name, _ in _calls(events)] == ["get_weather", "final_answer"]
    assert end.finish_reason == "completed"
    assert end.output.value == {
        "summary": "It is -3 °C, snow in Oslo.",
        "city": "It is -3 °C, snow in Oslo.",
        "tags": ["rain", "rain"],
        "temp_c": -40,
    }


@pytest.mark.parametrize("kind", KINDS)
async def test_a_scalar_schema_holds_the_text_within_its_length(kind: MessageKind) -> None:
    _, events = await _reply(kind, "hello", output={"type": "string", "maxLength": 12})
    assert events[-1].output.value == DEMO_HELP[:12]
