"""ToolSearchMiddleware: dynamic tools hidden until a search selects them, for the rest of
the reply (through a pause too), by name, keywords or embedding similarity."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from hookmesh.agent import Agent, Confirmation, Resume, tool
from hookmesh.middleware.builtin.tool_search import ToolSearchMiddleware
from hookmesh.models import ScriptedTurn
from hookmesh.remote import serve_middleware
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2 as _mw_pb2
from hookmesh.v1 import middleware_pb2_grpc as _mw_grpc
from tests.agent_helpers import SHORT_TIMEOUT, collect, echo
from tests.builtin_helpers import Recorded, documented_parameters, parameters, results
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather conditions and temperature for a city.

    Args:
        city: The city.
    """
    return f"{city}: -3 C, snow"


@tool(read_only=True)
def get_time(zone: str) -> str:
    """The current time in a time zone.

    Args:
        zone: An IANA zone name.
    """
    return f"12:00 in {zone}"


@tool(needs_confirmation=True)
def send_email(to: str, body: str) -> str:
    """Send an email message to someone.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


@tool(read_only=True)
def convert_currency(amount: float, to: str) -> str:
    """Convert an amount of money into another currency.

    Args:
        amount: How much.
        to: The currency code.
    """
    return f"{amount} {to}"


DYNAMIC = [get_weather, get_time, send_email, convert_currency]


def _search(query: str, **extra: Any) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[("tool_search", {"query": query, **extra})])


async def test_dynamic_tools_stay_hidden_until_a_search_selects_them(
    kind: MessageKind, attach: Attach
) -> None:
    rec = Recorded(
        [
            _search("weather"),
            ScriptedTurn(tool_calls=[("get_weather", {"city": "Oslo"})]),
            "Snowy.",
            "Next reply.",
        ]
    )
    mw = await attach(ToolSearchMiddleware(DYNAMIC))
    agent = Agent(rec.model, kind=kind, tools=[echo], middlewares=[mw])
    await collect(agent.reply("weather in Oslo?"))
    assert rec.tools[0] == ["echo", "tool_search"]
    assert rec.tools[1] == rec.tools[2] == ["echo", "tool_search", "get_weather"]
    got = results(agent)
    assert got["call_1"].text == (
        "These tools are now available to call:\n"
        "- get_weather: Current weather conditions and temperature for a city."
    )
    assert got["call_2"].text == "Oslo: -3 C, snow" and got["call_2"].state == "success"
    await collect(agent.reply("and now?"))
    assert rec.tools[3] == ["echo", "tool_search"]  # a new reply starts hidden again


async def test_select_syntax_keywords_and_required_words(kind: MessageKind, attach: Attach) -> None:
    rec = Recorded(
        [
            _search("select:get_time, nope,convert_currency"),
            _search("send money email"),
            _search("+email send money"),
            _search("current", max_results=1),
            _search("zebra"),
            "done",
        ]
    )
    mw = await attach(ToolSearchMiddleware(DYNAMIC))
    agent = Agent(rec.model, kind=kind, middlewares=[mw])
    await collect(agent.reply("go"))
    got = results(agent)
    assert got["call_1"].text.splitlines() == [
        "These tools are now available to call:",
        "- get_time: The current time in a time zone.",
        "- convert_currency: Convert an amount of money into another currency.",
        "Unknown tools: nope.",
    ]
    names = [
        [line[2:].split(":")[0] for line in got[f"call_{i}"].text.splitlines()[1:]]
        for i in (2, 3, 4)
    ]
    assert names == [["send_email", "convert_currency"], ["send_email"], ["get_time"]]
    assert got["call_5"].text == "No tools match 'zebra'. Try other keywords, or select:name."
    assert rec.tools[-1] == ["tool_search", "get_time", "send_email", "convert_currency"]


async def test_the_selection_survives_a_pause_and_resume(kind: MessageKind, attach: Attach) -> None:
    rec = Recorded(
        [
            _search("select:send_email"),
            ScriptedTurn(tool_calls=[("send_email", {"to": "a@b.c", "body": "hi"})]),
            "Sent.",
        ]
    )
    mw = await attach(ToolSearchMiddleware(DYNAMIC))
    agent = Agent(rec.model, kind=kind, middlewares=[mw])
    events = await collect(agent.reply("mail a@b.c"))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    assert agent.state.middle_context["tool_search"][agent.reply_id] == {"selected": ["send_email"]}
    await collect(
        agent.resume(Resume(confirmations=[Confirmation(call_id="call_2", confirmed=True)]))
    )
    assert rec.tools[2] == ["tool_search", "send_email"]
    assert results(agent)["call_2"].text == "sent to a@b.c"


async def test_embedding_similarity_finds_tools_words_miss(
    kind: MessageKind, attach: Attach
) -> None:
    from hookmesh.retrieval import default_embedder

    rec = Recorded([_search("is it freezing outside", max_results=1), "done"])
    plain = ToolSearchMiddleware(DYNAMIC)
    assert (await plain.search("is it freezing outside", 1))[0] == []
    mw = await attach(ToolSearchMiddleware(DYNAMIC, embedder=default_embedder()))
    agent = Agent(rec.model, kind=kind, middlewares=[mw])
    await collect(agent.reply("go"))
    assert rec.tools[1] == ["tool_search", "get_weather"]


async def test_call_tool_alone_answers_but_selects_nothing() -> None:
    running = await serve_middleware(ToolSearchMiddleware(DYNAMIC))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = _mw_grpc.MiddlewareServiceStub(channel)
            request = _mw_pb2.CallToolRequest(
                name="tool_search", arguments='{"query": "select:get_time"}'
            )
            pieces = [p async for p in stub.CallTool(request, timeout=SHORT_TIMEOUT)]
    finally:
        await running.stop(None)
    assert [p.WhichOneof("piece") for p in pieces] == ["text", "end"]
    assert pieces[0].text.endswith("- get_time: The current time in a time zone.")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([[]], {}, "at least one tool, with unique names"),
        ([[get_time, get_time]], {}, "unique names"),
        ([DYNAMIC], {"tool_name": "get_time"}, "named like the search tool"),
        ([DYNAMIC], {"max_results": 0}, "max_results must be an int >= 1"),
        ([DYNAMIC], {"max_results": 30}, "must not exceed max_results_limit"),
        ([DYNAMIC], {"failure_mode": "x"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated(args: list[Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ToolSearchMiddleware(*args, **kwargs)


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("tool_search.md") == parameters(ToolSearchMiddleware)
