"""Metrics: the points the real OpenTelemetry SDK exports for replies, model calls, tools,
middleware errors and remote hooks — both kinds, in process and via a sidecar."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookmesh.agent import Agent, Tool, tool
from hookmesh.metrics import record_remote_hook
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.metrics import MetricsMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import AgentEvent, MessageKind, Usage
from tests.agent_helpers import collect, echo
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def _echo(name: str) -> Tool:
    """`echo` under a name of the test's own: points are cumulative over the session."""

    def say(text: str) -> str:
        """Say the text back.

        Args:
            text: What to say.
        """
        return text

    return tool(say, name=name)  # type: ignore[no-any-return]


def _failing(name: str) -> Tool:
    """A tool that raises, under a name of the test's own."""

    def fail(text: str) -> str:
        """Always fails.

        Args:
            text: Ignored.
        """
        raise RuntimeError("tool broke")

    return tool(fail, name=name)  # type: ignore[no-any-return]


def points(reader: Any, name: str, **match: Any) -> list[Any]:
    """The data points of metric `name` whose attributes include `match`."""
    found = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in match.items()):
                        found.append(point)
    return found


@pytest.mark.parametrize("stream", [False, True])
async def test_replies_model_calls_and_tools_are_measured(
    kind: MessageKind, attach: Attach, metric_reader: Any, stream: bool, request: Any
) -> None:
    name = f"metered-{request.node.callspec.id}"
    model_name = f"m-{name}"
    tool_name = f"echo-{name}"
    turns = [
        ScriptedTurn(
            tool_calls=[(tool_name, {"text": "x"})], usage=Usage(input_tokens=11, output_tokens=3)
        ),
        ScriptedTurn(text="done", usage=Usage(input_tokens=17, output_tokens=5)),
    ]
    agent = Agent(
        ScriptedChatModel(turns, stream=stream, model_name=model_name),
        name=name,
        kind=kind,
        tools=[_echo(tool_name)],
        middlewares=[await attach(MetricsMiddleware())],
    )
    await collect(agent.reply("go"))

    [replies] = points(metric_reader, "hookmesh.agent.replies", **{"gen_ai.agent.name": name})
    assert (replies.value, replies.attributes["hookmesh.finish_reason"]) == (1, "completed")
    [reply_time] = points(
        metric_reader, "hookmesh.agent.reply.duration", **{"gen_ai.agent.name": name}
    )
    assert reply_time.count == 1 and reply_time.sum > 0
    model = {"gen_ai.request.model": model_name}
    [calls] = points(metric_reader, "gen_ai.client.operation.duration", **model)
    assert calls.count == 2
    assert (
        calls.attributes["gen_ai.operation.name"],
        calls.attributes["gen_ai.provider.name"],
    ) == (
        "chat",
        "scripted",
    )
    [tokens_in] = points(
        metric_reader, "gen_ai.client.token.usage", **model, **{"gen_ai.token.type": "input"}
    )
    [tokens_out] = points(
        metric_reader, "gen_ai.client.token.usage", **model, **{"gen_ai.token.type": "output"}
    )
    assert (tokens_in.count, tokens_in.sum) == (2, 28)
    assert (tokens_out.count, tokens_out.sum) == (2, 8)
    assert tokens_in.explicit_bounds[:3] == (1, 4, 16)  # the GenAI conventions' buckets
    # The one tool run: counted once, as a success, and timed once.
    [tool_calls] = points(metric_reader, "hookmesh.tool.calls", **{"gen_ai.tool.name": tool_name})
    assert (tool_calls.value, tool_calls.attributes["hookmesh.tool.state"]) == (1, "success")
    [tool_time] = points(metric_reader, "hookmesh.tool.duration", **{"gen_ai.tool.name": tool_name})
    assert tool_time.count == 1 and tool_time.sum >= 0


async def test_a_failed_model_call_carries_its_error_type(
    kind: MessageKind, metric_reader: Any
) -> None:
    model = ScriptedChatModel([ScriptedTurn(error="down")], model_name=f"broken-{kind}")
    agent = Agent(model, kind=kind, name=f"failing-{kind}", middlewares=[MetricsMiddleware()])
    await collect(agent.reply("go"))
    [failed] = points(
        metric_reader,
        "gen_ai.client.operation.duration",
        **{"gen_ai.request.model": f"broken-{kind}"},
    )
    assert failed.attributes["error.type"] == "MODEL_ERROR"
    [end] = points(
        metric_reader, "hookmesh.agent.replies", **{"gen_ai.agent.name": f"failing-{kind}"}
    )
    assert end.attributes["hookmesh.finish_reason"] == "error"


async def test_tool_calls_are_counted_by_state(kind: MessageKind, metric_reader: Any) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"}), ("echo", {"nope": 1})]), "ok"]
    earlier = {
        p.attributes["hookmesh.tool.state"]: p.value
        for p in points(metric_reader, "hookmesh.tool.calls", **{"gen_ai.tool.name": "echo"})
    }
    before = sum(earlier.values())
    agent = Agent(
        ScriptedChatModel(turns), kind=kind, tools=[echo], middlewares=[MetricsMiddleware()]
    )
    await collect(agent.reply("go"))
    after = {
        p.attributes["hookmesh.tool.state"]: p.value
        for p in points(metric_reader, "hookmesh.tool.calls", **{"gen_ai.tool.name": "echo"})
    }
    # The invalid call never ran (answered before on_acting): one run counted.
    assert sum(after.values()) - before == 1
    # ... as a success (points are cumulative: other tests' echo runs came before).
    grown = {state: n - earlier.get(state, 0) for state, n in after.items()}
    assert {state: n for state, n in grown.items() if n} == {"success": 1}


async def test_tool_calls_are_labelled_with_their_state(
    kind: MessageKind, attach: Attach, metric_reader: Any, request: Any
) -> None:
    ok, broken = f"ok-{request.node.callspec.id}", f"broken-{request.node.callspec.id}"
    turns = [
        ScriptedTurn(tool_calls=[(ok, {"text": "x"}), (broken, {"text": "y"}), (ok, {"nope": 1})]),
        "ok",
    ]
    agent = Agent(
        ScriptedChatModel(turns),
        kind=kind,
        tools=[_echo(ok), _failing(broken)],
        middlewares=[await attach(MetricsMiddleware())],
    )
    await collect(agent.reply("go"))

    def by_state(name: str) -> dict[str, int]:
        found = points(metric_reader, "hookmesh.tool.calls", **{"gen_ai.tool.name": name})
        return {p.attributes["hookmesh.tool.state"]: p.value for p in found}

    # The invalid call never ran (answered before on_acting): only the run is counted.
    assert by_state(ok) == {"success": 1}
    assert by_state(broken) == {"error": 1}
    for name in (ok, broken):
        [timed] = points(metric_reader, "hookmesh.tool.duration", **{"gen_ai.tool.name": name})
        assert timed.count == 1


class Broken(Middleware):
    """Fails in on_reasoning."""

    def __init__(self, key: str, failure_mode: Any) -> None:
        self.key = key
        self.failure_mode = failure_mode

    def middleware_key(self) -> str:
        return self.key

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("broken")
        yield  # pragma: no cover


@pytest.mark.parametrize("failure_mode", ["fail_open", "fail_closed"])
async def test_middleware_errors_are_counted(
    kind: MessageKind, metric_reader: Any, failure_mode: str
) -> None:
    key = f"broken-{kind}-{failure_mode}"
    agent = Agent(ScriptedChatModel(["ok"]), kind=kind, middlewares=[Broken(key, failure_mode)])
    await collect(agent.reply("go"))
    [errors] = points(metric_reader, "hookmesh.middleware.errors", **{"hookmesh.middleware": key})
    assert (errors.value, errors.attributes["hookmesh.failure_mode"]) == (1, failure_mode)
    if failure_mode == "fail_open":
        assert errors.attributes["hookmesh.hook"] == "on_reasoning"


def test_remote_hook_latency_is_recorded(metric_reader: Any) -> None:
    record_remote_hook("audit", "on_acting", 0.0031)
    record_remote_hook("audit", "on_acting", 5.0, error="SIDECAR_DEADLINE_EXCEEDED")
    ok = points(metric_reader, "hookmesh.remote.hook.duration", **{"hookmesh.middleware": "audit"})
    by_error = {p.attributes.get("error.type", ""): p for p in ok}
    assert (by_error[""].count, by_error[""].sum) == (1, 0.0031)
    assert by_error["SIDECAR_DEADLINE_EXCEEDED"].count == 1
