"""Structured output over real gRPC on loopback: the request's schema and the configured one,
both strategies and kinds, the final error, and bad schemas refused before any event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from pydantic import BaseModel

from hookmesh.agent import FINAL_TOOL
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.errors import SchemaError
from hookmesh.schema import ReplyEndEvent, is_assistant, text_of
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.v1 import agent_pb2, agent_pb2_grpc, message_pb2
from tests.agent_helpers import SHORT_TIMEOUT
from tests.servers import stopped_at_exit, target

pytestmark = pytest.mark.timeout(60)


class Weather(BaseModel):
    """The weather in one city."""

    city: str
    temp_c: float


GOOD = {"city": "Oslo", "temp_c": -3}
BAD = {"city": "Oslo", "temp_c": "cold"}
Start = Callable[..., Awaitable[AgentService]]


def _turn(strategy: str, value: Any) -> Any:
    if strategy == "tool":
        return {"tool_calls": [{"name": FINAL_TOOL, "arguments": value}]}
    return json.dumps(value)


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Agent services on 127.0.0.1:0 playing scripted answers; stopped at the end."""

    async def run(
        strategy: str, answers: list[Any], *, stream: bool = True, **config: Any
    ) -> AgentService:
        model = {
            "type": "scripted",
            "turns": [_turn(strategy, a) for a in answers],
            "stream": stream,
            "native_output": strategy == "native",
        }
        settings = load_config(
            None, store=f"sqlite:///{tmp_path}/agent.db", models={"default": model}, **config
        )
        return await start_agent_service(settings, address="127.0.0.1:0")

    async with stopped_at_exit(run) as started:
        yield started


async def _end(client: AgentClient, **options: Any) -> tuple[ReplyEndEvent, str]:
    events = [e async for e in client.reply("Weather in Oslo?", **options)]
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end, events[0].session_id  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["flat", "agentic"])
@pytest.mark.parametrize("strategy", ["native", "tool"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_requests_schema_gives_a_typed_value(
    start: Start, kind: str, strategy: str, stream: bool
) -> None:
    service = await start(strategy, [BAD, GOOD], stream=stream, agent={"kind": kind})
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        end, session_id = await _end(client, output=Weather)
        assert end.finish_reason == "completed"
        assert end.output is not None and end.output.schema_name == "Weather"
        assert end.output.value == GOOD and isinstance(end.output.value["temp_c"], int)
        session = await client.get_session(session_id)
        final = [m for m in session.context if is_assistant(m)][-1]
        assert json.loads(text_of(final)) == GOOD


async def test_the_configured_schema_applies_when_the_request_names_none(start: Start) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    config = {"output_schema": {"name": "Count", "schema": schema, "max_retries": 0}}
    service = await start("native", [{"n": 2}, {"n": "two"}], agent=config)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        end, _ = await _end(client)
        assert end.output is not None and end.output.value == {"n": 2}
        end, _ = await _end(client)
        assert end.error is not None and end.error.reason == "OUTPUT_INVALID"
        assert end.error.metadata["path"] == "$.n"
        assert end.error.metadata["validatorMessage"] == "'two' is not of type 'integer'"


async def test_a_bad_configured_schema_stops_the_service_naming_the_key(tmp_path: Path) -> None:
    settings = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        agent={"output_schema": {"schema": {"type": "objekt"}}},
    )
    with pytest.raises(SchemaError) as caught:
        await start_agent_service(settings, address="127.0.0.1:0")
    assert caught.value.violations[0].field == "agent.output_schema.schema.type"


def _nested(depth: int) -> struct_pb2.Struct:
    """A schema nesting `depth` levels: an enum of nested lists (a Struct carries lists
    deeper than objects before protobuf's own nesting limit)."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return _struct({"enum": value})


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


BAD_SCHEMAS: list[tuple[str, agent_pb2.OutputSchema, str]] = [
    ("not JSON Schema", agent_pb2.OutputSchema(schema=_struct({"type": 3})), "schema.type"),
    (
        "bad keyword value",
        agent_pb2.OutputSchema(schema=_struct({"properties": {"a": {"minLength": -1}}})),
        "schema.properties.a.minLength",
    ),
    ("too deep", agent_pb2.OutputSchema(schema=_nested(34)), "schema"),
    (
        "too large",
        agent_pb2.OutputSchema(schema=_struct({"description": "x" * 70_000})),
        "schema",
    ),
    (
        "remote reference",
        agent_pb2.OutputSchema(schema=_struct({"$ref": "http://127.0.0.1:9/s.json"})),
        "schema.$ref",
    ),
    ("no schema", agent_pb2.OutputSchema(name="x"), "schema"),
    (
        "bad name",
        agent_pb2.OutputSchema(name="a b", schema=_struct({"type": "object"})),
        "name",
    ),
    (
        "too many retries",
        agent_pb2.OutputSchema(schema=_struct({"type": "object"}), max_retries=11),
        "max_retries",
    ),
]


async def test_a_bad_schema_gets_invalid_argument_with_its_path(start: Start) -> None:
    service = await start("native", [GOOD], max_request_bytes=1_000_000)
    user = message_pb2.Message(
        flat=message_pb2.FlatMessage(role=message_pb2.ROLE_USER, content="hi")
    )
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        for name, schema, field in BAD_SCHEMAS:
            request = agent_pb2.ReplyRequest(messages=[user], output_schema=schema)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                _ = [r async for r in stub.Reply(request, timeout=SHORT_TIMEOUT)]
            error = AgentClientError.from_rpc_error(caught.value)
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, name
            assert error.reason == "INVALID_OUTPUT_SCHEMA", name
            assert [v.field for v in error.violations] == [f"output_schema.{field}"], name
