"""The demo: the suite on loopback and one conversation through a local and a remote middleware;
the demo tools and middlewares `hookmesh up` offers the demo model."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from hookmesh.agent import tool
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    Middleware,
    ModelCallArgs,
    ModelCallNext,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.middleware.builtin.handoff import Handoff, HandoffMiddleware
from hookmesh.middleware.builtin.tts import TTSMiddleware
from hookmesh.models import (
    ChatModel,
    OpenAIModelConfig,
    ScriptedChatModel,
    build_model,
    intent_of,
    openai_model_from_env,
)
from hookmesh.schema import AgentEvent, CustomEvent, is_user, text_of
from hookmesh.services.agent import AgentServiceConfig, load_config

SKILLS = str(Path(__file__).with_name("demo_skills"))
"""The demo's skills folder (one skill, ``winter-layers``)."""


@tool(read_only=True, concurrency_safe=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    table = {"oslo": "-3 °C, snow", "lisbon": "17 °C, sunny"}
    return table.get(city.lower(), "12 °C, cloudy")


@tool(needs_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file (the user confirms first). The demo's: it shows the confirmation and
    touches nothing.

    Args:
        path: The file to delete.
    """
    return f"deleted {path} (a demo: no file was touched)"


def where_it_runs(agent: AgentView) -> str:
    """``sidecar`` or ``in-process``: where the hook calling it runs (a sidecar's agent view
    has no model to call; the agent's own always has one)."""
    return "sidecar" if agent.model is None else "in-process"


class SpokenAnswers(TTSMiddleware):
    """Speaks only the replies whose user asked to hear them (the demo model's ``speak``
    intent: "say …", "… out loud"), so the rest of the suite's replies stay silent. Same
    parameters as `TTSMiddleware`."""

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        asked = " ".join(text_of(m) for m in kwargs["inputs"] if is_user(m))
        intent = intent_of(asked)
        if intent is None or intent.name != "speak":
            return next_handler()
        return super().on_reply(agent, kwargs, next_handler)


class UsageMeter(Middleware):
    """Counts model calls and tokens per reply, reported before reply_end with where it ran."""

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> Any:
        state = self.state(agent)
        state["model_calls"] = state.get("model_calls", 0) + 1
        return await next_handler()

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            if event.type == "model_call_end" and event.usage is not None:
                state = self.state(agent)
                state["tokens"] = state.get("tokens", 0) + event.usage.output_tokens
            if event.type == "reply_end" and not event.source_path:
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name=f"usage_meter ({where_it_runs(agent)})",
                    value=self.state(agent),
                )
            yield event


class AuditTrail(Middleware):
    """Records each tool run and announces it to the client, saying where it ran (the suite
    serves it by a sidecar)."""

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_acting": ("tool_result_end",)}

    async def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        call = kwargs["tool_call"]
        async for event in next_handler():
            yield event
            if event.type == "tool_result_end":
                audited = self.state(agent).setdefault("audited", [])
                audited.append(call.name)
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name=f"audit_trail ({where_it_runs(agent)})",
                    value={"tool": call.name, "call_id": call.id, "state": event.state},
                )


CHEF_ANSWER = (
    "Chef here. Mushrooms love butter, garlic and thyme: a creamy mushroom risotto, or "
    "mushrooms on toast with a soft egg."
)
"""What the demo's chef says without a real model."""


def front_desk() -> HandoffMiddleware:
    """The demo's handoff: ``transfer_to_chef`` hands the conversation to a chef agent, which
    answers the rest of the reply (the last two messages and the request go to it). The chef
    runs the real model when OPENAI_BASE_URL is set, else says `CHEF_ANSWER`."""
    openai = openai_model_from_env()
    chef: ChatModel = (
        build_model(OpenAIModelConfig.model_validate(openai))
        if openai is not None
        else ScriptedChatModel([CHEF_ANSWER], stream=True, repeat=True)
    )
    return HandoffMiddleware(
        [
            Handoff(
                "chef",
                chef,
                "Suggests dishes and recipes.",
                system_prompt="You are a friendly chef. Suggest a dish in two sentences.",
                input_filter="last",
                last_n=2,
            )
        ]
    )


WARDROBE = [
    (
        "snow",
        "Snow and frost",
        "Below freezing or in snow: an insulated coat, a warm hat, gloves and "
        "waterproof boots with a good grip.",
    ),
    (
        "rain",
        "Rain",
        "In rain and wind: a hooded waterproof jacket and quick-drying shoes; "
        "umbrellas fail in gusts.",
    ),
    ("sun", "Sun", "Warm and sunny: light breathable layers, sunglasses and sunscreen."),
]
"""The demo's knowledge base: (document id, title, text)."""

FIRST = "I'm vegetarian, by the way. What should I wear in the snow in Oslo today?"
SECOND = "What should I cook tonight?"
THIRD = "Put me through to the chef: what goes with mushrooms?"
QUESTIONS = (FIRST, SECOND, THIRD)


def demo_config(data_dir: str | None = None) -> AgentServiceConfig:
    """The embedded demo configuration: the demo model (an OpenAI-compatible one when
    OPENAI_BASE_URL is set).

    The suite: a retrieval service (knowledge base ``wardrobe``), a memory service whose
    scripted model extracts facts, a sidecar serving `AuditTrail`, and the agent with
    in-process middlewares for memory, RAG, usage metering, skills (`SKILLS`, for a real
    model: the demo model loads none) and a handoff to a chef (`front_desk`).
    """
    data_dir = data_dir or tempfile.mkdtemp(prefix="hookmesh-demo-")
    models: dict[str, Any] = {"default": {"type": "demo"}}
    if (openai := openai_model_from_env()) is not None:
        models = {"default": openai}
    extractor = {"type": "scripted", "turns": ['{"facts": ["The user is vegetarian."]}']}
    return load_config(
        None,
        listen="127.0.0.1:0",
        store=f"sqlite:///{data_dir}/agent.db",
        grace_seconds=2,
        agent={
            "name": "demo",
            "system_prompt": "You are a concise assistant. Use tools for facts.",
        },
        models=models,
        tools=["hookmesh.suite.demo:get_weather"],
        middlewares=[
            {"type": "local", "import": "hookmesh.suite.demo:UsageMeter"},
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
                "params": {
                    "target": "service:memory",
                    "user_id": "demo-user",
                    "mode": "static_control",
                },
            },
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.rag:RAGMiddleware",
                "params": {
                    "knowledge_bases": ["wardrobe"],
                    "target": "service:retrieval",
                    "mode": "static",
                    "top_k": 1,
                    "search_mode": "dense",
                    "score_threshold": 0.3,
                    "persist_hint": True,
                    "hint_template": "Wardrobe notes (cite by number):\n{context}",
                },
            },
            {"type": "remote", "sidecar": "audit", "failure_mode": "fail_open"},
            {
                "type": "local",
                "import": "hookmesh.middleware.builtin.skills:SkillsMiddleware",
                "params": {"root": SKILLS},
            },
            {"type": "local", "import": "hookmesh.suite.demo:front_desk"},
        ],
        sidecars=[{"name": "audit", "middleware": "hookmesh.suite.demo:AuditTrail"}],
        services={
            "retrieval": {"listen": "127.0.0.1:0", "store": f"sqlite:///{data_dir}/retrieval.db"},
            "memory": {
                "listen": "127.0.0.1:0",
                "store": f"sqlite:///{data_dir}/memory.db",
                "model": extractor,
            },
        },
    )


class Printer(Protocol):
    """Shows one reply's events as they arrive (the CLI passes its event printer)."""

    def show(self, event: AgentEvent) -> None: ...


async def run_demo(
    console: Console, printer: Callable[[Console], Printer], *, serve: bool = False
) -> int:
    """Start the suite, seed the knowledge base, run `QUESTIONS`, one session each (the last
    is handed off to the chef); 0 when all complete.
    With `serve`, then serve the AG-UI chat page in front of the suite until Ctrl-C.

    Args:
        console: Where the demo writes.
        printer: Makes a fresh printer for each reply's events.
        serve: Keep the suite up behind the chat page until Ctrl-C.
    """
    finishes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hookmesh-demo-") as data_dir:
        await _converse(demo_config(data_dir), console, printer, finishes, serve)
    return 0 if finishes == ["completed"] * len(QUESTIONS) else 1


async def _converse(
    settings: AgentServiceConfig,
    console: Console,
    printer: Callable[[Console], Printer],
    finishes: list[str],
    serve: bool,
) -> None:
    from hookmesh.client import AgentClient, RetrievalClient
    from hookmesh.retrieval import Document
    from hookmesh.suite._up import start_suite

    async with start_suite(settings) as suite:
        addresses = ", ".join(
            [f"agent {suite.agent_address}"]
            + [f"{n} {a}" for n, a in suite.services.items()]
            + [f"sidecar {n} {a}" for n, a in suite.sidecars.items()]
        )
        console.print(f"[dim]{addresses}[/dim]")
        async with RetrievalClient(suite.services["retrieval"], timeout=60) as kb:
            await kb.create_knowledge_base("wardrobe", "What to wear in which weather")
            await kb.ingest(
                "wardrobe", [Document(i, text, {"title": title}) for i, title, text in WARDROBE]
            )
        async with AgentClient(suite.agent_address, timeout=120) as client:
            for number, question in enumerate(QUESTIONS, start=1):
                console.print(f"\n[bold]session {number} — you:[/bold] {question}")
                shown = printer(console)
                async for event in client.reply(question):
                    shown.show(event)
                    if event.type == "reply_end" and not event.source_path:
                        finishes.append(event.finish_reason)
        if serve:
            await _serve_page(console, suite.agent_address)


async def _serve_page(console: Console, agent_address: str) -> None:
    """The chat page (AG-UI gateway) in front of the demo's agent, until SIGINT/SIGTERM."""
    from hookmesh.server import wait_for_signal
    from hookmesh.services.agui import load_agui_config, start_agui_gateway

    config = load_agui_config(None, agent=agent_address)
    gateway = await start_agui_gateway(config, address="127.0.0.1:0")
    try:
        console.print(f"\nchat page: http://127.0.0.1:{gateway.port}/  (Ctrl-C stops)")
        await wait_for_signal()
    finally:
        await gateway.stop(config.grace_seconds)
