"""Structured output in process: both strategies, both kinds, streamed or not, with the
after_agent hook in process and behind a sidecar; retries, the final error, bad schemas,
and a structured reply that pauses, is saved and continues elsewhere."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from hookmesh.agent import (
    FINAL_TOOL,
    MAX_SCHEMA_BYTES,
    Agent,
    AgentState,
    Confirmation,
    Resume,
    output_spec,
    tool,
)
from hookmesh.errors import SchemaError
from hookmesh.middleware import AgentView, Middleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    Message,
    MessageKind,
    ReplyEndEvent,
    is_hint,
    make_text,
    text_of,
    tool_results,
)
from tests.agent_helpers import collect
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

Strategy = Literal["native", "tool"]


class Weather(BaseModel):
    """The weather in one city."""

    city: str
    temp_c: float


GOOD = {"city": "Oslo", "temp_c": -3}
BAD = {"city": "Oslo", "temp_c": "cold"}


class OutputNote(Middleware):
    """after_agent notes the structured answer it was given (a user text in the context)."""

    needs_context = True

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        output = agent.output
        seen = None if output is None else [output.schema_name, output.as_json()]
        agent.state.context.append(make_text(agent.kind, "user", f"note:{json.dumps(seen)}"))


def _answer(strategy: Strategy, value: Any) -> ScriptedTurn:
    """One model answer giving `value`, as the strategy expects it."""
    if strategy == "tool":
        return ScriptedTurn(tool_calls=[(FINAL_TOOL, value)])
    return ScriptedTurn(text=json.dumps(value))


def _model(strategy: Strategy, answers: list[Any], stream: bool) -> ScriptedChatModel:
    return ScriptedChatModel(
        [_answer(strategy, a) for a in answers], stream=stream, native_output=strategy == "native"
    )


def _end(events: list[AgentEvent]) -> ReplyEndEvent:
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end


def _note(agent: Agent) -> Any:
    notes = [text_of(m) for m in agent.state.context if text_of(m).startswith("note:")]
    return json.loads(notes[-1].removeprefix("note:")) if notes else None


@pytest.mark.parametrize("strategy", ["native", "tool"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_valid_answer_is_the_reply_ends_value(
    kind: MessageKind, attach: Attach, strategy: Strategy, stream: bool
) -> None:
    model = _model(strategy, [GOOD], stream)
    agent = Agent(model, kind=kind, middlewares=[await attach(OutputNote())])
    end = _end(await collect(agent.reply("Weather in Oslo?", output=Weather)))
    assert end.finish_reason == "completed" and end.error is None
    assert end.output is not None and end.output.schema_name == "Weather"
    assert end.output.value == Weather(city="Oslo", temp_c=-3)
    assert _note(agent) == ["Weather", {"city": "Oslo", "temp_c": -3.0}]
    final = agent.final_message
    assert final is not None and json.loads(text_of(final)) == GOOD
    assert model.calls == 1


@pytest.mark.parametrize("strategy", ["native", "tool"])
@pytest.mark.parametrize("stream", [False, True])
async def test_an_invalid_answer_is_asked_again_with_the_validators_error(
    kind: MessageKind, attach: Attach, strategy: Strategy, stream: bool
) -> None:
    model = _model(strategy, [BAD, GOOD], stream)
    agent = Agent(model, kind=kind, middlewares=[await attach(OutputNote())])
    events = await collect(agent.reply("Weather?", output=Weather))
    end = _end(events)
    assert end.finish_reason == "completed"
    assert end.output is not None and end.output.value == Weather(city="Oslo", temp_c=-3)
    assert model.calls == 2
    feedback = _feedback(agent.state.context)
    assert "at $.temp_c: 'cold' is not of type 'number'" in feedback
    if strategy == "native":
        hints = [e for e in events if e.type == "hint_block"]
        assert len(hints) == 1 and hints[0].source == "output" and hints[0].text == feedback
    assert _note(agent) == ["Weather", {"city": "Oslo", "temp_c": -3.0}]


def _feedback(context: list[Message]) -> str:
    """What the model was told about its refused answer: a hint, or an error tool result."""
    for msg in context:
        if is_hint(msg):
            return text_of(msg)
        for result in tool_results(msg):
            if result.state == "error":
                return result.text
    raise AssertionError("the model was told nothing")


@pytest.mark.parametrize("strategy", ["native", "tool"])
@pytest.mark.parametrize("stream", [False, True])
async def test_answers_that_never_validate_end_with_output_invalid(
    kind: MessageKind, attach: Attach, strategy: Strategy, stream: bool
) -> None:
    model = _model(strategy, [BAD, BAD, GOOD], stream)
    agent = Agent(model, kind=kind, middlewares=[await attach(OutputNote())])
    spec = output_spec(Weather, max_retries=1)
    end = _end(await collect(agent.reply("Weather?", output=spec)))
    assert end.finish_reason == "error" and end.output is None
    assert end.error is not None and end.error.reason == "OUTPUT_INVALID"
    assert end.error.metadata["path"] == "$.temp_c"
    assert end.error.metadata["validatorMessage"] == "'cold' is not of type 'number'"
    assert end.error.metadata["attempts"] == "2"
    assert end.error.metadata["schemaName"] == "Weather"
    assert model.calls == 2
    assert _note(agent) is None  # after_agent never ran


async def test_no_retries_fail_at_the_first_invalid_answer(kind: MessageKind) -> None:
    model = _model("native", [BAD, GOOD], False)
    agent = Agent(model, kind=kind)
    end = _end(await collect(agent.reply("Weather?", output=output_spec(Weather, max_retries=0))))
    assert end.error is not None and end.error.reason == "OUTPUT_INVALID"
    assert model.calls == 1


async def test_a_json_schema_gives_plain_json(kind: MessageKind) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    model = _model("native", [{"n": 4}], False)
    agent = Agent(model, kind=kind, output=schema)
    end = _end(await collect(agent.reply("Count?")))
    assert end.output is not None and end.output.value == {"n": 4}
    assert end.output.schema_name == "output"
    assert model.last_output is not None and model.last_output.schema == schema


async def test_a_non_object_schema_goes_through_the_tool_as_its_value() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    seen: list[list[dict[str, Any]]] = []

    def script(messages: Any, tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append(list(tools))
        return ScriptedTurn(tool_calls=[(FINAL_TOOL, {"value": [1, 2]})])

    agent = Agent(ScriptedChatModel(script))
    end = _end(await collect(agent.reply("Numbers?", output=schema)))
    assert end.output is not None and end.output.value == [1, 2]
    (definition,) = seen[0]
    assert definition["parameters"]["properties"]["value"] == schema


async def test_the_tool_strategy_requires_a_call_and_turns_none_into_the_final_tool() -> None:
    model = _model("tool", [GOOD, GOOD], False)
    agent = Agent(model)
    await collect(agent.reply("Weather?", output=Weather))
    assert model.last_tool_choice == "required"
    await collect(agent.reply("Again, no tools", output=Weather, tool_choice="none"))
    assert model.last_tool_choice == FINAL_TOOL


async def test_a_text_answer_under_the_tool_strategy_counts_when_it_validates() -> None:
    model = ScriptedChatModel(["```json\n" + json.dumps(GOOD) + "\n```"])
    agent = Agent(model)
    end = _end(await collect(agent.reply("Weather?", output=Weather)))
    assert end.output is not None and end.output.value == Weather(city="Oslo", temp_c=-3)


async def test_the_final_answer_ends_the_step_without_running_other_calls() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note a text.

        Args:
            text: The text.
        """
        ran.append(text)
        return "ok"

    turn = ScriptedTurn(tool_calls=[("note", {"text": "x"}), (FINAL_TOOL, GOOD)])
    agent = Agent(ScriptedChatModel([turn]), tools=[note])
    end = _end(await collect(agent.reply("Weather?", output=Weather)))
    assert end.output is not None and ran == []
    results = [r for m in agent.state.context for r in tool_results(m)]
    assert [(r.name, r.state) for r in results] == [("note", "error"), (FINAL_TOOL, "success")]


@pytest.mark.parametrize("failed_before", [False, True])
async def test_a_structured_reply_survives_a_pause_and_a_move_to_another_agent(
    kind: MessageKind, failed_before: bool
) -> None:
    @tool(needs_confirmation=True)
    def lookup(city: str) -> str:
        """Look the weather up.

        Args:
            city: The city.
        """
        return "-3 C"

    ask = ScriptedTurn(tool_calls=[("lookup", {"city": "Oslo"})])
    before = [_answer("native", BAD)] if failed_before else []
    after = [_answer("native", BAD), _answer("native", GOOD)]
    first = Agent(ScriptedChatModel([*before, ask], native_output=True), tools=[lookup], kind=kind)
    paused = await collect(first.reply("Weather?", output=output_spec(Weather, max_retries=1)))
    assert _end(paused).finish_reason == "awaiting_confirmation"
    state = AgentState.model_validate_json(first.state.model_dump_json())
    model = ScriptedChatModel(after, native_output=True)
    second = Agent(model, tools=[lookup], kind=kind, state=state)
    call_id = state.pending.confirm_calls[0].id  # type: ignore[union-attr]
    resume = Resume(confirmations=[Confirmation(call_id=call_id, confirmed=True)])
    end = _end(await collect(second.resume(resume)))
    assert model.last_output is not None and model.last_output.name == "Weather"
    if failed_before:  # the failure before the pause counts: no retry is left
        assert end.error is not None and end.error.reason == "OUTPUT_INVALID"
        assert end.error.metadata["attempts"] == "2" and model.calls == 1
    else:
        assert end.output is not None and end.output.value == Weather(city="Oslo", temp_c=-3)


async def test_a_return_directly_result_must_be_a_valid_answer() -> None:
    @tool(return_directly=True)
    def report(ok: bool) -> str:
        """Report.

        Args:
            ok: Whether to report valid JSON.
        """
        return json.dumps(GOOD) if ok else "not json"

    for ok, reason in ((True, None), (False, "OUTPUT_INVALID")):
        model = ScriptedChatModel([ScriptedTurn(tool_calls=[("report", {"ok": ok})])])
        end = _end(await collect(Agent(model, tools=[report]).reply("go", output=Weather)))
        assert (end.error.reason if end.error else None) == reason
        assert (end.output is not None) is ok


@pytest.mark.parametrize(
    ("schema", "field", "words"),
    [
        ({"type": "nope"}, "output.schema.type", "not valid JSON Schema"),
        ({"type": "object", "required": "city"}, "output.schema.required", "not valid JSON"),
        ({"$ref": "https://example.com/s.json"}, "output.schema.$ref", "inside the schema"),
        ({"$ref": "#/$defs/Missing"}, "output.schema.$ref", "does not resolve"),
        ({"description": "x" * MAX_SCHEMA_BYTES}, "output.schema", "bytes as JSON"),
        (json.loads('{"items":' * 40 + "{}" + "}" * 40), "output.schema", "nests more than"),
    ],
)
def test_a_bad_schema_is_refused_with_its_path(schema: Any, field: str, words: str) -> None:
    with pytest.raises(SchemaError) as caught:
        output_spec(schema)
    assert caught.value.reason == "INVALID_OUTPUT_SCHEMA"
    assert caught.value.violations[0].field == field
    assert words in caught.value.violations[0].description


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"name": "has space"}, "output.name"),
        ({"max_retries": 11}, "output.max_retries"),
        ({"strategy": "guess"}, "output.strategy"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(SchemaError) as caught:
        output_spec({"type": "object"}, **options)
    assert caught.value.violations[0].field == field


def test_a_schema_is_compiled_once() -> None:
    schema = {"type": "object", "properties": {"once": {"type": "string"}}}
    assert output_spec(dict(schema)) is output_spec(dict(schema))
    assert output_spec(Weather) is output_spec(Weather)
