"""The offline demo: one conversation with a tool call through an in-process middleware."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from hookmesh.agent import Agent, tool
from hookmesh.agent.models import ChatModel, OpenAIChatModel, ScriptedChatModel, ScriptedTurn
from hookmesh.middleware import Middleware
from hookmesh.schema import AgentEvent, CustomEvent


@tool(read_only=True, concurrency_safe=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    table = {"oslo": "-3 °C, snow", "lisbon": "17 °C, sunny"}
    return table.get(city.lower(), "12 °C, cloudy")


class UsageMeter(Middleware):
    """Counts model calls per reply and reports them as a custom event before reply_end."""

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        state = self.state(agent)
        state["model_calls"] = state.get("model_calls", 0) + 1
        return await next_handler()

    async def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            if event.type == "reply_end":
                yield CustomEvent(
                    reply_id=event.reply_id, name="usage_meter", value=self.state(agent)
                )
            yield event


def demo_model() -> ChatModel:
    """The scripted model, or an OpenAI-compatible one when OPENAI_BASE_URL is set."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        return OpenAIChatModel(
            base_url,
            os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            api_key=os.environ.get("OPENAI_API_KEY", ""),
        )
    return ScriptedChatModel(
        [
            ScriptedTurn(
                tool_calls=[("get_weather", {"city": "Oslo"})], reasoning="I should look it up."
            ),
            "It is -3 °C with snow in Oslo: wear a warm coat.",
        ],
        stream=True,
    )


def show(event: AgentEvent) -> None:
    """Print one event compactly."""
    t = event.type
    if t == "text_block_delta":
        print(event.delta, end="", flush=True)  # type: ignore[union-attr]
    elif t == "text_block_end":
        print()
    elif t == "tool_call_start":
        print(f"  -> tool call {event.name} ({event.call_id})")  # type: ignore[union-attr]
    elif t == "tool_result_delta":
        print(f"  <- tool result: {event.text}")  # type: ignore[union-attr]
    elif t == "custom":
        print(f"  [middleware {event.name}] {event.value}")  # type: ignore[union-attr]
    elif t in ("reply_start", "reply_end", "model_call_start", "model_call_end"):
        extra = f" {event.finish_reason}" if t == "reply_end" else ""  # type: ignore[union-attr]
        print(f"[{t}{extra}]")


async def main() -> int:
    agent = Agent(
        demo_model(),
        name="demo",
        system_prompt="You are a concise assistant.",
        tools=[get_weather],
        middlewares=[UsageMeter()],
    )
    print("user: What should I wear in Oslo today?")
    finish = None
    async for event in agent.reply("What should I wear in Oslo today?"):
        show(event)
        if event.type == "reply_end":
            finish = event.finish_reason
    return 0 if finish == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
