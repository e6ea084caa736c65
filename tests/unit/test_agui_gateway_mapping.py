"""The gateway's pure parts: hookmesh events → AG-UI events (each stream checked by
ag-ui-validate) and which input goes to the agent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

from hookmesh.client import SessionInfo
from hookmesh.errors import SchemaError
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    EventSource,
    HintBlockEvent,
    ImageBlock,
    InlineSource,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyError,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    Usage,
)
from hookmesh.services.agui import RunEvents
from hookmesh.services.agui._input import (
    ReplyPlan,
    ResumePlan,
    RunRefused,
    parse_run_input,
    plan_run,
)

R = "reply-1"


def _run(events: list[AgentEvent], answered: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    mapper = RunEvents("thread", "run", answered)
    out = list(mapper.start({"app": 1}, None))
    for event in events:
        out.extend(mapper.map(event))
    return [e.model_dump(mode="json", by_alias=True) for e in out]


def _end(reason: str = "completed", **fields: Any) -> ReplyEndEvent:
    return ReplyEndEvent(reply_id=R, finish_reason=reason, **fields)  # type: ignore[arg-type]


def test_hints_data_blocks_and_middleware_events_are_custom_events_and_state() -> None:
    events = _run(
        [
            HintBlockEvent(reply_id=R, block_id="h1", text="[1] Wear a coat.", source="rag"),
            DataBlockStartEvent(reply_id=R, block_id="d1", media_type="audio/pcm;rate=22050"),
            DataBlockDeltaEvent(reply_id=R, block_id="d1", data=b"\x00\x01\xff"),
            DataBlockEndEvent(reply_id=R, block_id="d1"),
            CustomEvent(reply_id=R, name="budget/left", value={"tokens": 9}),
            _end(),
        ]
    )
    customs = [(e["name"], e["value"]) for e in events if e["type"] == "CUSTOM"]
    assert customs == [
        ("hookmesh.hint", {"blockId": "h1", "source": "rag", "text": "[1] Wear a coat."}),
        (
            "hookmesh.data_block_start",
            {"blockId": "d1", "mediaType": "audio/pcm;rate=22050", "name": ""},
        ),
        ("hookmesh.data_block_delta", {"blockId": "d1", "data": "AAH/"}),
        ("hookmesh.data_block_end", {"blockId": "d1"}),
        ("budget/left", {"tokens": 9}),
    ]
    [delta] = [e for e in events if e["type"] == "STATE_DELTA"]
    assert delta["delta"] == [
        {"op": "add", "path": "/hookmesh/middlewares/budget~1left", "value": {"tokens": 9}}
    ]
    assert events[1]["snapshot"]["app"] == 1  # the client's state is kept
    assert_valid_agui(events, features=["shared-state"], max_warnings=0)


def test_a_failed_reply_closes_what_is_open_before_run_error() -> None:
    error = ReplyError(reason="MODEL_ERROR", message="boom", source="model")
    events = _run(
        [
            ModelCallStartEvent(reply_id=R, model_name="m"),
            TextBlockStartEvent(reply_id=R, block_id="b1"),
            TextBlockDeltaEvent(reply_id=R, block_id="b1", delta="par"),
            _end("error", error=error),
        ]
    )
    assert [e["type"] for e in events[-3:]] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]
    assert (events[-1]["code"], events[-1]["message"]) == ("MODEL_ERROR", "boom")
    assert_valid_agui(events, max_warnings=0)


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("interrupted", {"type": "cancelled"}),
        ("exceed_max_iters", {"type": "success"}),
        ("completed", {"type": "success"}),
    ],
)
def test_finish_reasons_map_to_outcomes(reason: str, outcome: dict[str, Any]) -> None:
    events = _run([_end(reason)])
    assert events[-1]["outcome"] == outcome
    assert events[-1]["result"] == {"finishReason": reason}
    assert_valid_agui(events, max_warnings=0)


def _call(model: str, usage: Usage | None) -> list[AgentEvent]:
    return [
        ModelCallStartEvent(reply_id=R, model_name=model),
        ModelCallEndEvent(reply_id=R, model_name=model, usage=usage),
    ]


def test_run_finished_usage_sums_every_model_call_of_the_run() -> None:
    """Three calls, two of one model, one without usage: RUN_FINISHED has one entry per
    model with every call's tokens summed, and the state's running total matches."""
    first = Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4, reasoning_tokens=1)
    second = Usage(input_tokens=20, output_tokens=5, cache_creation_tokens=2)
    other = Usage(input_tokens=7, output_tokens=1)
    events = _run(
        [
            *_call("big", first),
            *_call("small", other),
            *_call("big", None),
            *_call("big", second),
            _end(),
        ]
    )
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    by_model = {u["model"]: u for u in finished["usage"]}
    assert by_model["big"] == {
        **by_model["big"],
        "inputTokens": 30,
        "outputTokens": 8,
        "totalTokens": 38,
        "cachedInputTokens": 4,
        "cacheWriteInputTokens": 2,
        "reasoningTokens": 1,
    }
    assert (by_model["small"]["inputTokens"], by_model["small"]["totalTokens"]) == (7, 8)
    deltas = [e["delta"][0]["value"] for e in events if e["type"] == "STATE_DELTA"]
    assert deltas[-1] == {"inputTokens": 37, "outputTokens": 9}
    assert_valid_agui(events, max_warnings=0)


def test_a_run_without_usage_reports_none() -> None:
    events = _run([*_call("big", None), _end()])
    assert events[-1].get("usage") is None
    assert "STATE_DELTA" not in [e["type"] for e in events]


def test_results_the_client_sent_are_not_sent_back_and_media_results_are_parts() -> None:
    image = ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))
    events = _run(
        [
            ToolResultStartEvent(reply_id=R, call_id="fe", name="locate"),
            ToolResultDeltaEvent(reply_id=R, call_id="fe", text="Oslo"),
            ToolResultEndEvent(reply_id=R, call_id="fe"),
            ToolResultStartEvent(reply_id=R, call_id="c2", name="chart"),
            ToolResultDeltaEvent(reply_id=R, call_id="c2", text="see "),
            ToolResultDeltaEvent(reply_id=R, call_id="c2", text="this"),
            ToolResultDeltaEvent(reply_id=R, call_id="c2", media=image),
            ToolResultEndEvent(reply_id=R, call_id="c2", state="error"),
        ],
        answered=frozenset({"fe"}),
    )
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "c2"
    assert result["content"] == [
        {"type": "text", "text": "see this"},
        {"type": "image", "source": {"type": "data", "value": "iVBORw==", "mimeType": "image/png"}},
    ]
    assert result["metadata"] == {"hookmesh": {"state": "error"}}


# --- which input goes to the agent ---------------------------------------------------------


def _session(status: str, *pending: str) -> SessionInfo:
    now = datetime.now(UTC)
    calls = [ToolCall(id=p, name="t", arguments="{}") for p in pending]
    return SessionInfo("t", "a", status, [], calls, now, now)  # type: ignore[arg-type]


def _input(*messages: dict[str, Any], **fields: Any) -> Any:
    return parse_run_input({"threadId": "t", "runId": "r", "messages": list(messages), **fields})


USER = {"id": "u1", "role": "user", "content": "hi"}
ASSISTANT = {"id": "a1", "role": "assistant", "content": "hello"}
SERVER_RESULT = {"id": "x1", "role": "tool", "toolCallId": "srv", "content": "ran here"}


def test_a_new_thread_gets_the_whole_history_but_activity() -> None:
    activity = {"id": "v", "role": "activity", "activityType": "plan", "content": {}}
    plan = plan_run(_input(USER, activity, ASSISTANT, {**USER, "id": "u2"}), None)
    assert isinstance(plan, ReplyPlan)
    assert [m.role for m in plan.messages] == ["user", "assistant", "user"]


def test_a_known_thread_gets_only_the_new_messages() -> None:
    new = {"id": "u2", "role": "user", "content": "again"}
    plan = plan_run(_input(USER, ASSISTANT, SERVER_RESULT, new), _session("idle"))
    assert isinstance(plan, ReplyPlan)
    assert [m.id for m in plan.messages] == ["u2"]
    with pytest.raises(RunRefused) as exc:
        plan_run(_input(USER, ASSISTANT), _session("idle"))
    assert exc.value.code == "NO_NEW_MESSAGE"


def test_front_end_results_answer_only_the_pending_calls() -> None:
    answer = {"id": "y1", "role": "tool", "toolCallId": "fe", "content": "Oslo", "error": "no"}
    plan = plan_run(
        _input(USER, ASSISTANT, SERVER_RESULT, answer),
        _session("awaiting_external_execution", "fe"),
    )
    assert isinstance(plan, ResumePlan)
    [result] = plan.external_results
    assert (result.call_id, result.state) == ("fe", "error")
    assert plan.answered == frozenset({"fe"})
    for messages, code in [
        ((USER, ASSISTANT, SERVER_RESULT), "TOOL_RESULTS_PENDING"),
        ((USER, ASSISTANT, answer, {**USER, "id": "u9"}), "TOOL_RESULTS_PENDING"),
    ]:
        with pytest.raises(RunRefused) as exc:
            plan_run(_input(*messages), _session("awaiting_external_execution", "fe"))
        assert exc.value.code == code


def test_a_bad_new_message_names_its_index() -> None:
    bad = {"id": "u2", "role": "user", "content": [{"type": "hologram"}]}
    with pytest.raises(SchemaError) as exc:
        plan_run(_input(USER, ASSISTANT, bad), _session("idle"))
    assert exc.value.violations[0].field == "messages[2].content[0].type"


def test_forwarded_props_set_reply_options() -> None:
    props = {"hookmesh": {"toolChoice": "none", "maxIters": 3, "model": "big"}, "other": 1}
    request = _input(USER, forwardedProps=props)
    assert request.options == {"tool_choice": "none", "max_iters": 3, "model": "big"}
    with pytest.raises(SchemaError) as exc:
        _input(USER, forwardedProps={"hookmesh": {"maxIters": True}})
    assert exc.value.violations[0].field == "forwardedProps.hookmesh.maxIters"


def test_a_sub_agents_events_are_nested_custom_events_and_its_ask_names_who_asks() -> None:
    """A worker's pause and end neither pause nor end the run; the top confirmation's
    interrupt says who asks (the path in its arguments)."""
    step = EventSource(call_id="c1", tool_name="ask_ops", agent_name="ops", run_id="r2")
    deep = EventSource(call_id="c2", tool_name="ask_janitor", agent_name="janitor", run_id="r3")
    delete = ToolCall(id="d1", name="delete_file", arguments='{"path": "a"}')
    top = ToolCall(id="k1", name="confirm_ops", arguments='{"path": ["ops", "janitor"]}')
    events = _run(
        [
            ToolCallStartEvent(reply_id=R, call_id="c2", name="ask_janitor", source_path=[step]),
            TextBlockDeltaEvent(reply_id=R, block_id="t", delta="hm", source_path=[step]),
            RequireUserConfirmEvent(reply_id=R, tool_calls=[delete], source_path=[step, deep]),
            _end("awaiting_confirmation", source_path=[step, deep]),
            RequireUserConfirmEvent(reply_id=R, tool_calls=[top]),
            _end("awaiting_confirmation"),
        ]
    )
    nested = [e["value"] for e in events if e["type"] == "CUSTOM"]
    assert nested == [
        {"path": ["ops"], "type": "tool_call_start", "toolCallId": "c2", "toolName": "ask_janitor"},
        {
            "path": ["ops", "janitor"],
            "type": "require_user_confirm",
            "toolCalls": [{"id": "d1", "name": "delete_file", "arguments": '{"path": "a"}'}],
        },
        {"path": ["ops", "janitor"], "type": "reply_end", "finishReason": "awaiting_confirmation"},
    ]
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["hm"]
    assert [e["type"] for e in events].count("RUN_FINISHED") == 1
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == "k1"
    assert interrupt["metadata"]["hookmesh"]["askedBy"] == ["ops", "janitor"]
    assert interrupt["message"].startswith("ops/janitor asks: Allow confirm_ops with ")
    assert_valid_agui(events, max_warnings=0)


def _external_call(call_id: str, name: str, arguments: str) -> list[AgentEvent]:
    return [
        ToolCallStartEvent(reply_id=R, call_id=call_id, name=name),
        ToolCallDeltaEvent(reply_id=R, call_id=call_id, delta=arguments[:9]),
        ToolCallDeltaEvent(reply_id=R, call_id=call_id, delta=arguments[9:]),
        ToolCallEndEvent(reply_id=R, call_id=call_id),
    ]


def test_a_sub_agents_external_call_is_the_tool_it_stands_for_and_a_clients_stays_itself() -> None:
    """A hidden ``external_scout`` call is sent as `locate` with its arguments and who asks;
    a client's own ``external_lookup`` tool (no tool named in its arguments) as it came."""
    spec = {"worker": "scout", "path": ["scout"], "tool": "locate", "arguments": '{"p": 1}'}
    own = '{"path": ["a"], "q": "x"}'
    calls = [
        ToolCall(id="x1", name="external_scout", arguments=json.dumps(spec)),
        ToolCall(id="x2", name="external_lookup", arguments=own),
    ]
    events = _run(
        [
            *_external_call("x1", "external_scout", json.dumps(spec)),
            *_external_call("x2", "external_lookup", own),
            RequireExternalExecutionEvent(reply_id=R, tool_calls=calls),
            _end("awaiting_external_execution"),
        ]
    )
    mapped = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert [(e["type"], e.get("toolCallName"), e.get("delta")) for e in mapped] == [
        ("TOOL_CALL_START", "locate", None),
        ("TOOL_CALL_ARGS", None, '{"p": 1}'),
        ("TOOL_CALL_END", None, None),
        ("TOOL_CALL_START", "external_lookup", None),
        ("TOOL_CALL_ARGS", None, own),
        ("TOOL_CALL_END", None, None),
    ]
    assert mapped[0]["metadata"] == {"hookmesh": {"askedBy": ["scout"], "via": "external_scout"}}
    assert mapped[3].get("metadata") is None
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["x1", "x2"]}
    assert_valid_agui(events, max_warnings=0)


def test_a_held_external_call_cut_by_a_failed_reply_is_still_started_and_ended() -> None:
    spec = {"worker": "scout", "path": ["scout"], "tool": "locate", "arguments": "{}"}
    events = _run(
        [
            ToolCallStartEvent(reply_id=R, call_id="x1", name="external_scout"),
            ToolCallDeltaEvent(reply_id=R, call_id="x1", delta=json.dumps(spec)),
            _end("error", error=ReplyError(reason="MODEL_ERROR", message="cut")),
        ]
    )
    assert [(e["type"], e.get("toolCallName")) for e in events[2:]] == [
        ("TOOL_CALL_START", "locate"),
        ("TOOL_CALL_ARGS", None),
        ("TOOL_CALL_END", None),
        ("RUN_ERROR", None),
    ]
    assert_valid_agui(events, max_warnings=0)
