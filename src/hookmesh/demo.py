"""The demo: the suite on loopback and one conversation through a local and a remote middleware."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from rich.console import Console

from hookmesh.agent import tool
from hookmesh.middleware import Middleware
from hookmesh.schema import AgentEvent, CustomEvent
from hookmesh.services.agent import AgentServiceConfig, load_config


@tool(read_only=True, concurrency_safe=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    table = {"oslo": "-3 °C, snow", "lisbon": "17 °C, sunny"}
    return table.get(city.lower(), "12 °C, cloudy")


class UsageMeter(Middleware):
    """In process: counts model calls and tokens per reply, reported before reply_end."""

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        state = self.state(agent)
        state["model_calls"] = state.get("model_calls", 0) + 1
        return await next_handler()

    async def on_reply(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            if event.type == "model_call_end" and event.usage is not None:
                state = self.state(agent)
                state["tokens"] = state.get("tokens", 0) + event.usage.output_tokens
            if event.type == "reply_end":
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name="usage_meter (in-process)",
                    value=self.state(agent),
                )
            yield event


class AuditTrail(Middleware):
    """Served by a sidecar: records each tool run and announces it to the client."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_acting": ("tool_result_end",)}

    async def on_acting(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        call = kwargs["tool_call"]
        async for event in next_handler():
            yield event
            if event.type == "tool_result_end":
                audited = self.state(agent).setdefault("audited", [])
                audited.append(call.name)
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name="audit_trail (sidecar)",
                    value={"tool": call.name, "call_id": call.id, "state": event.state},
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


def demo_config(data_dir: str | None = None) -> AgentServiceConfig:
    """The embedded demo configuration (OpenAI-compatible model when OPENAI_BASE_URL is set).

    The suite: a retrieval service (knowledge base ``wardrobe``), a memory service whose
    scripted model extracts facts, a sidecar serving `AuditTrail`, and the agent with
    in-process middlewares for memory, RAG and usage metering.
    """
    data_dir = data_dir or tempfile.mkdtemp(prefix="hookmesh-demo-")
    models: dict[str, Any] = {
        "default": {
            "type": "scripted",
            "turns": [
                {
                    "reasoning": "The user needs the weather first.",
                    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
                },
                "It is -3 °C with snow in Oslo: wear an insulated coat, a warm hat, gloves and "
                "waterproof boots [1].",
                "You told me you are vegetarian, so: a mushroom risotto.",
            ],
        }
    }
    if os.environ.get("OPENAI_BASE_URL"):
        models = {
            "default": {
                "type": "openai",
                "base_url": os.environ["OPENAI_BASE_URL"],
                "model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            }
        }
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
        tools=["hookmesh.demo:get_weather"],
        middlewares=[
            {"type": "local", "import": "hookmesh.demo:UsageMeter"},
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
                    "hint_template": "Wardrobe notes (cite by number):\n{context}",
                },
            },
            {"type": "remote", "sidecar": "audit", "failure_mode": "fail_open"},
        ],
        sidecars=[{"name": "audit", "middleware": "hookmesh.demo:AuditTrail"}],
        services={
            "retrieval": {"store": f"sqlite:///{data_dir}/retrieval.db"},
            "memory": {"store": f"sqlite:///{data_dir}/memory.db", "model": extractor},
        },
    )


async def run_demo(console: Console) -> int:
    """Start the suite, seed the knowledge base, run two sessions; 0 when both complete."""
    from hookmesh.cli import EventPrinter
    from hookmesh.client import AgentClient, RetrievalClient
    from hookmesh.retrieval import Document
    from hookmesh.services.suite import start_suite

    settings = demo_config()
    finishes: list[str] = []
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
            for number, question in enumerate((FIRST, SECOND), start=1):
                console.print(f"\n[bold]session {number} — you:[/bold] {question}")
                printer = EventPrinter(console)
                async for event in client.reply(question):
                    printer.show(event)
                    if event.type == "reply_end":
                        finishes.append(event.finish_reason)
    return 0 if finishes == ["completed", "completed"] else 1
