"""The RAG middleware: static hints and the agentic search tool, flat and agentic, in process
and via a sidecar, against a real retrieval service (or a real local store), real embeddings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, Confirmation, Resume
from hookmesh.client import RetrievalClient
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.rag import (
    DEFAULT_HINT_TEMPLATE,
    WARNING_EVENT,
    RAGMiddleware,
    format_passages,
    latest_user_text,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.retrieval import Document, open_knowledge_store
from hookmesh.schema import (
    AgentEvent,
    HintBlockEvent,
    Message,
    MessageKind,
    ToolCall,
    is_hint,
    make_assistant,
    make_hint,
    make_tool_result,
    make_user_text,
    text_of,
)
from hookmesh.services.retrieval import (
    RetrievalService,
    load_retrieval_config,
    start_retrieval_service,
)
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs, echo
from tests.conftest import Attach
from tests.service_tools import delete_file

pytestmark = pytest.mark.timeout(60)

HANDBOOK = [
    Document(
        "vacation",
        "Full-time employees get 25 days of paid vacation per year. Unused vacation days "
        "carry over until March 31.",
    ),
    Document(
        "expenses",
        "Submit travel expenses within 30 days with receipts attached; meals are reimbursed "
        "up to 40 euros per day.",
    ),
    Document(
        "security",
        "Lock your laptop screen when you leave your desk and report a lost badge at once.",
    ),
]
RECIPES = [
    Document(
        "pancakes",
        "Whisk flour, milk, two eggs and a pinch of salt; rest the batter 20 minutes, then "
        "fry thin pancakes in butter.",
    ),
    Document("soup", "Simmer lentils with onion, carrot and cumin, then blend into a soup."),
]
VACATION = "How many vacation days do I get?"


async def _seed(client: Any) -> None:
    await client.create_knowledge_base("handbook", "Company policies")
    await client.create_knowledge_base("recipes", "Cooking")
    await client.ingest("handbook", HANDBOOK)
    await client.ingest("recipes", RECIPES)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[RetrievalService]:
    """A retrieval service on 127.0.0.1:0 holding the two knowledge bases."""
    running = await start_retrieval_service(
        load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db"), address="127.0.0.1:0"
    )
    try:
        async with RetrievalClient(f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT) as client:
            await _seed(client)
        yield running
    finally:
        await running.stop(None)


@pytest.fixture
def target(service: RetrievalService) -> str:
    return f"127.0.0.1:{service.port}"


@pytest.fixture
async def rags() -> AsyncIterator[list[RAGMiddleware]]:
    """RAG middlewares made by a test, whose channels are closed at its end."""
    made: list[RAGMiddleware] = []
    yield made
    for rag in made:
        await rag.aclose()


class Recorder:
    """A scripted model that records the messages and tool definitions of every call."""

    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        self.turns = list(turns)
        self.prompts: list[list[Message]] = []
        self.tools: list[list[dict[str, Any]]] = []

    def __call__(self, messages: Sequence[Message], tools: Any, unused_choice: Any) -> ScriptedTurn:
        self.prompts.append(list(messages))
        self.tools.append(list(tools))
        return self.turns[len(self.prompts) - 1]

    def hints(self, call: int) -> list[str]:
        """Texts of the hint messages model call `call` saw."""
        return [text_of(m) for m in self.prompts[call] if is_hint(m)]


def hint_events(events: list[AgentEvent]) -> list[HintBlockEvent]:
    return [e for e in events if isinstance(e, HintBlockEvent)]


def tool_text(events: list[AgentEvent]) -> str:
    return "".join(e.text for e in events if e.type == "tool_result_delta")  # type: ignore[union-attr]


async def test_static_mode_hints_cited_passages_at_the_first_step_only(
    kind: MessageKind, attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook", "recipes"], target=target, mode="static", top_k=2)
    rags.append(rag)
    model = Recorder(
        [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), ScriptedTurn(text="25 days [1].")]
    )
    agent = Agent(
        ScriptedChatModel(model), kind=kind, tools=[echo], middlewares=[await attach(rag)]
    )
    events = await collect(agent.reply(VACATION))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    [hint] = model.hints(0)
    assert hint.startswith(DEFAULT_HINT_TEMPLATE.split("{context}")[0])
    assert "[1] (handbook/vacation) Full-time employees get 25 days" in hint
    assert "[2] (" in hint and "[3] (" not in hint
    assert model.hints(1) == []  # removed after the first step, and no second search
    [event] = hint_events(events)
    assert (event.source, event.text) == ("rag", hint)
    assert event.block_id == f"{events[0].reply_id}-rag"
    assert not any(is_hint(m) for m in agent.state.context)
    assert "rag" not in agent.state.middle_context or not agent.state.middle_context["rag"]


async def test_static_hint_can_persist_without_an_event(
    kind: MessageKind, attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(
        ["handbook"],
        target=target,
        mode="static",
        persist_hint=True,
        emit_hint_event=False,
        hint_template="Context:\n{context}\n(Literal {braces} stay.)",
    )
    rags.append(rag)
    model = Recorder([ScriptedTurn(text="one"), ScriptedTurn(text="two")])
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[await attach(rag)])
    first = await collect(agent.reply(VACATION))
    second = await collect(agent.reply("And how do I file travel expenses?"))
    assert hint_events(first + second) == []
    assert model.hints(0)[0].startswith("Context:\n[1] (handbook/vacation)")
    assert model.hints(0)[0].endswith("(Literal {braces} stay.)")
    kept = [text_of(m) for m in agent.state.context if is_hint(m)]
    assert len(kept) == 2  # one per reply, both kept
    assert "[1] (handbook/expenses)" in kept[1]
    assert model.hints(1) == kept


async def test_no_hint_when_nothing_scores_high_enough(
    kind: MessageKind, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(
        ["handbook"], target=target, mode="static", search_mode="dense", score_threshold=0.99
    )
    rags.append(rag)
    model = Recorder([ScriptedTurn(text="I do not know.")])
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[rag])
    events = await collect(agent.reply(VACATION))
    assert hint_events(events) == [] and model.hints(0) == []
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_a_failed_search_fails_open_with_a_warning(
    kind: MessageKind, attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook", "missing"], target=target, mode="static")
    rags.append(rag)
    model = Recorder([ScriptedTurn(text="answered anyway")])
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[await attach(rag)])
    events = await collect(agent.reply(VACATION))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    [warning] = [e for e in customs(events) if e.name == WARNING_EVENT]
    assert warning.value["reason"] == "KNOWLEDGE_BASE_NOT_FOUND"
    assert hint_events(events) == [] and model.hints(0) == []


async def test_an_unreachable_service_fails_open(
    kind: MessageKind, service: RetrievalService, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook"], target=target, mode="static", timeout=5.0)
    rags.append(rag)
    await service.stop(None)
    agent = Agent(ScriptedChatModel(["still here"]), kind=kind, middlewares=[rag])
    events = await collect(agent.reply(VACATION))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    [warning] = customs(events)
    assert warning.value["reason"] == "UNAVAILABLE"


async def test_fail_closed_ends_the_reply_with_an_error(
    kind: MessageKind, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["missing"], target=target, mode="static", failure_mode="fail_closed")
    rags.append(rag)
    agent = Agent(ScriptedChatModel(["never said"]), kind=kind, middlewares=[rag])
    events = await collect(agent.reply(VACATION))
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error is not None and end.error.source == "middleware:rag"  # type: ignore[union-attr]
    assert "knowledge search failed" in end.error.message  # type: ignore[union-attr]
    assert end.error.metadata["errorType"] == "RAGError"  # type: ignore[union-attr]
    assert not [e for e in events if e.type == "text_block_delta"]


async def test_agentic_mode_searches_with_a_tool_limited_to_the_mounted_bases(
    kind: MessageKind, attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook", "recipes"], target=target, top_k=1)
    rags.append(rag)
    call = {"query": "how long should pancake batter rest", "knowledge_bases": ["recipes"]}
    model = Recorder(
        [ScriptedTurn(tool_calls=[("search_knowledge", call)]), ScriptedTurn(text="20 minutes [1]")]
    )
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[await attach(rag)])
    events = await collect(agent.reply("pancakes?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert tool_text(events).startswith("[1] (recipes/pancakes) Whisk flour")
    assert "[2]" not in tool_text(events)
    [definition] = model.tools[0]
    assert definition["name"] == "search_knowledge"
    schema = definition["parameters"]["properties"]["knowledge_bases"]
    assert schema["items"]["enum"] == ["handbook", "recipes"]
    assert definition["parameters"]["required"] == ["query"]
    tool = agent.toolkit.get("search_knowledge")
    assert tool is not None and tool.read_only and tool.concurrency_safe
    assert model.hints(0) == [] and hint_events(events) == []  # no reasoning layer


async def test_the_tool_refuses_a_base_that_is_not_mounted(
    kind: MessageKind, attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook"], target=target)
    rags.append(rag)
    calls = [
        ("search_knowledge", {"query": "recipes", "knowledge_bases": ["recipes"]}),
        ("search_knowledge", {"query": ""}),
        ("search_knowledge", {"query": "vacation", "extra": 1}),
    ]
    model = Recorder([ScriptedTurn(tool_calls=calls), ScriptedTurn(text="ok")])
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[await attach(rag)])
    events = await collect(agent.reply("find a recipe"))
    ends = [e for e in events if e.type == "tool_result_end"]
    assert [e.state for e in ends] == ["error", "error", "error"]  # type: ignore[union-attr]
    text = tool_text(events)
    assert "knowledge_bases" in text and "'handbook'" in text
    assert "(recipes/" not in text  # nothing was searched


async def test_the_tool_reports_a_failed_search_to_the_model(
    kind: MessageKind, service: RetrievalService, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook"], target=target, timeout=5.0)
    rags.append(rag)
    await service.stop(None)
    model = Recorder(
        [ScriptedTurn(tool_calls=[("search_knowledge", {"query": "q"})]), ScriptedTurn(text="ok")]
    )
    agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[rag])
    events = await collect(agent.reply("?"))
    assert [e.state for e in events if e.type == "tool_result_end"] == ["error"]  # type: ignore[union-attr]
    assert "the knowledge search failed (UNAVAILABLE)" in tool_text(events)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


class Rendezvous(ScriptedChatModel):
    """A scripted model whose calls wait for each other, so two replies overlap for sure."""

    def __init__(self, barrier: asyncio.Barrier, recorder: Recorder) -> None:
        super().__init__(recorder)
        self.barrier = barrier

    async def __call__(self, messages: Sequence[Message], **options: Any) -> Any:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await self.barrier.wait()
        return await super().__call__(messages, **options)


async def test_one_instance_serves_two_agents_at_once(
    attach: Attach, target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook", "recipes"], target=target, mode="static", top_k=1)
    rags.append(rag)
    shared = await attach(rag)
    barrier = asyncio.Barrier(2)
    models = [Recorder([ScriptedTurn(text="a")]), Recorder([ScriptedTurn(text="b")])]
    agents = [
        Agent(Rendezvous(barrier, models[0]), kind="flat", middlewares=[shared]),
        Agent(Rendezvous(barrier, models[1]), kind="agentic", middlewares=[shared]),
    ]
    questions = [VACATION, "How do I make lentil soup?"]
    results = await asyncio.gather(
        *(collect(agent.reply(q)) for agent, q in zip(agents, questions, strict=True))
    )
    assert [hint_events(r)[0].text.count("[1] (") for r in results] == [1, 1]
    assert "(handbook/vacation)" in models[0].hints(0)[0]
    assert "(recipes/soup)" in models[1].hints(0)[0]
    assert [e.reply_id for e in hint_events(results[0])] == [results[0][0].reply_id]
    for agent in agents:
        assert not any(is_hint(m) for m in agent.state.context)


async def test_a_resumed_reply_is_not_searched_again(
    target: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook"], target=target, mode="static")
    rags.append(rag)
    model = Recorder(
        [ScriptedTurn(tool_calls=[("delete_file", {"path": "a"})]), ScriptedTurn(text="done")]
    )
    agent = Agent(ScriptedChatModel(model), tools=[delete_file], middlewares=[rag])
    paused = await collect(agent.reply(VACATION))
    assert paused[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    call_id = agent.state.pending.confirm_calls[0].id  # type: ignore[union-attr]
    resumed = await collect(
        agent.resume(Resume(confirmations=[Confirmation(call_id=call_id, confirmed=True)]))
    )
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert len(hint_events(paused + resumed)) == 1
    assert model.hints(1) == []


async def test_a_local_store_works_the_same(kind: MessageKind, tmp_path: Path) -> None:
    async with await open_knowledge_store(f"sqlite:///{tmp_path}/local.db") as store:
        await _seed(store)
        rag = RAGMiddleware(["handbook"], store=store, mode="static", top_k=1)
        model = Recorder([ScriptedTurn(text="ok")])
        agent = Agent(ScriptedChatModel(model), kind=kind, middlewares=[rag])
        await collect(agent.reply("Do I need receipts for travel costs?"))
        [hint] = model.hints(0)
        assert "[1] (handbook/expenses) Submit travel expenses" in hint
        await rag.aclose()  # nothing to close: the store is the caller's
        assert await store.list_knowledge_bases()


def test_parameters_are_checked() -> None:
    bad: list[dict[str, Any]] = [
        {"knowledge_bases": []},
        {"knowledge_bases": "handbook"},
        {"knowledge_bases": ["a", "a"]},
        {"knowledge_bases": ["Not A Name"]},
        {"tool_name": "search knowledge"},
        {"key": ""},
        {"knowledge_bases": ["a"], "target": None},
        {"knowledge_bases": ["a"], "store": object()},
        {"mode": "eager"},
        {"top_k": 0},
        {"top_k": 51},
        {"search_mode": "fuzzy"},
        {"hint_template": "no placeholder"},
        {"hint_template": "{context} twice {context}"},
        {"failure_mode": "maybe"},
        {"timeout": 0},
    ]
    for overrides in bad:
        params: dict[str, Any] = {"knowledge_bases": ["a"], "target": "127.0.0.1:1", **overrides}
        if "store" in overrides:
            params["target"] = "127.0.0.1:1"
        with pytest.raises(ValueError):
            RAGMiddleware(**params)
    static = RAGMiddleware(["a"], target="127.0.0.1:1", mode="static")
    agentic = RAGMiddleware(["a"], target="127.0.0.1:1", tool_name="search_a", key="rag_a")
    assert static.implements("on_reasoning") and static.list_tools() == []
    assert not agentic.implements("on_reasoning")
    assert [t.name for t in agentic.list_tools()] == ["search_a"]
    assert agentic.middleware_key() == "rag_a"


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="HOOKMESH_RAG_TARGET"):
        RAGMiddleware.from_env()
    monkeypatch.setenv("HOOKMESH_RAG_TARGET", "127.0.0.1:7002")
    monkeypatch.setenv("HOOKMESH_RAG_KNOWLEDGE_BASES", "handbook, recipes")
    monkeypatch.setenv("HOOKMESH_RAG_MODE", "static")
    monkeypatch.setenv("HOOKMESH_RAG_TOP_K", "3")
    rag = RAGMiddleware.from_env()
    assert (rag.target, rag.knowledge_bases, rag.mode, rag.top_k) == (
        "127.0.0.1:7002",
        ["handbook", "recipes"],
        "static",
        3,
    )


def test_the_query_is_the_latest_user_turn(kind: MessageKind) -> None:
    call = ToolCall(id="c1", name="echo", arguments="{}")
    context = [
        make_user_text(kind, "first question"),
        make_assistant(kind, "", [call]),
        make_tool_result(kind, "c1", "echo", "tool output"),
        make_hint(kind, "a hint", "other", id="h"),
    ]
    assert latest_user_text(context) == "first question"
    assert latest_user_text([*context, make_user_text(kind, "second")]) == "second"
    assert latest_user_text([]) == ""
    assert format_passages([]) == ""


# --- whose search ------------------------------------------------------------------------------

USERS = "alice:tok-alice,bob:tok-bob,agent:tok-agent"


@pytest.fixture
async def owned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A retrieval service checking tokens, with ownership on, where the agent is a trusted
    gateway with a read grant on every base (as `hookmesh up --token-env` sets it up), and
    ``handbook`` is Alice's. Its address."""
    monkeypatch.setenv("RAG_TEST_USERS", USERS)
    monkeypatch.setenv("RAG_AGENT_TOKEN", "tok-agent")
    config = load_retrieval_config(
        None,
        store=f"sqlite:///{tmp_path}/kb.db",
        auth={"token_env": "RAG_TEST_USERS", "trusted_gateways": ["agent"]},
        ownership=True,
        access={"agent": {"read": ["*"]}},
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    try:
        async with RetrievalClient(target, timeout=SHORT_TIMEOUT, token="tok-alice") as alice:
            await alice.create_knowledge_base("handbook")
            await alice.ingest("handbook", HANDBOOK)
        yield target
    finally:
        await running.stop(None)


async def _static_reply(rag: Middleware, user: str) -> list[AgentEvent]:
    agent = Agent(ScriptedChatModel(["ok"]), middlewares=[rag], user_id=user)
    return await collect(agent.reply(VACATION))


async def test_a_static_search_acts_for_the_replys_user(
    attach: Attach, owned: str, rags: list[RAGMiddleware]
) -> None:
    """The agent's own grant reads every base, yet Bob's reply does not see Alice's base:
    the search is Bob's (retrieval checks his grants and ownership), and Alice's is hers."""
    rag = RAGMiddleware(["handbook"], target=owned, mode="static", token_env="RAG_AGENT_TOKEN")
    rags.append(rag)
    mounted = await attach(rag)
    alices = await _static_reply(mounted, "alice")
    [hint] = hint_events(alices)
    assert "25 days of paid vacation" in hint.text
    bobs = await _static_reply(mounted, "bob")
    assert hint_events(bobs) == []
    [warning] = [c for c in customs(bobs) if c.name == WARNING_EVENT]
    assert warning.value["reason"] == "KNOWLEDGE_BASE_NOT_GRANTED"
    assert bobs[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # A reply with no known user searches as the agent itself.
    assert len(hint_events(await _static_reply(mounted, ""))) == 1


async def test_the_search_tool_acts_for_the_replys_user(
    attach: Attach, owned: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(["handbook"], target=owned, token_env="RAG_AGENT_TOKEN")
    rags.append(rag)
    mounted = await attach(rag)

    async def search_as(user: str) -> str:
        model = Recorder(
            [
                ScriptedTurn(tool_calls=[("search_knowledge", {"query": "vacation days"})]),
                ScriptedTurn(text="ok"),
            ]
        )
        agent = Agent(ScriptedChatModel(model), middlewares=[mounted], user_id=user)
        return tool_text(await collect(agent.reply(VACATION)))

    assert "(handbook/vacation)" in await search_as("alice")
    bobs = await search_as("bob")
    assert "the knowledge search failed (KNOWLEDGE_BASE_NOT_GRANTED)" in bobs
    assert "vacation" not in bobs.split("(", 1)[0]


async def test_act_for_user_off_searches_as_the_agent(
    owned: str, rags: list[RAGMiddleware]
) -> None:
    rag = RAGMiddleware(
        ["handbook"], target=owned, mode="static", token_env="RAG_AGENT_TOKEN", act_for_user=False
    )
    rags.append(rag)
    assert len(hint_events(await _static_reply(rag, "bob"))) == 1


async def test_a_service_that_does_not_trust_the_agent_refuses_to_let_it_act_for_a_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rags: list[RAGMiddleware]
) -> None:
    monkeypatch.setenv("RAG_TEST_USERS", USERS)
    monkeypatch.setenv("RAG_AGENT_TOKEN", "tok-agent")
    config = load_retrieval_config(
        None, store=f"sqlite:///{tmp_path}/kb.db", auth={"token_env": "RAG_TEST_USERS"}
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    try:
        rag = RAGMiddleware(
            ["handbook"],
            target=f"127.0.0.1:{running.port}",
            mode="static",
            token_env="RAG_AGENT_TOKEN",
        )
        rags.append(rag)
        events = await _static_reply(rag, "alice")
    finally:
        await running.stop(None)
    [warning] = [c for c in customs(events) if c.name == WARNING_EVENT]
    assert warning.value["reason"] == "UNTRUSTED_GATEWAY"
