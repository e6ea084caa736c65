"""The native structured-output strategy against the real llama-cpp-python server the suite
runs (SmolLM2-135M): its grammar-constrained JSON mode makes even this small model answer
valid JSON for a small schema, in both kinds, streamed or not."""

from __future__ import annotations

import json

import pytest

from hookmesh.agent import Agent
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.schema import MessageKind, ReplyEndEvent
from tests.agent_helpers import collect
from tests.integration.test_llama_server import CALL_TIMEOUT, base_url

__all__ = ["base_url"]  # the module-scoped server fixture, shared with its own tests

pytestmark = pytest.mark.timeout(180)

SCHEMA = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "green", "blue"]}, "bright": {"type": "boolean"}},
    "required": ["color", "bright"],
}
# NOTE(llama): greedy; room for the whole object (the grammar keeps it short).
SETTINGS = {"max_tokens": 48, "temperature": 0, "seed": 7}


@pytest.mark.parametrize("kind", ["flat", "agentic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_server_answers_valid_json_for_the_schema(
    base_url: str, kind: MessageKind, stream: bool
) -> None:
    async with OpenAIChatModel(
        base_url,
        "smollm2",
        stream=stream,
        timeout=CALL_TIMEOUT,
        extra_body=SETTINGS,
        response_format="json_object",
    ) as model:
        agent = Agent(model, kind=kind, output=SCHEMA, system_prompt="Answer in JSON.")
        events = await collect(agent.reply("Name a color of the sky."), timeout=CALL_TIMEOUT)
    end = events[-1]
    assert isinstance(end, ReplyEndEvent) and end.finish_reason == "completed", end
    assert end.output is not None
    assert end.output.value["color"] in ("red", "green", "blue")
    assert isinstance(end.output.value["bright"], bool)
    assert not [e for e in events if e.type == "tool_call_start"]  # native, not the tool
    text = "".join(e.delta for e in events if e.type == "text_block_delta")
    assert json.loads(text) == end.output.value
    assert sum(e.type == "model_call_start" for e in events) == 1  # valid at once
