"""Deliberately broken conformance sidecars: each breaks one rule of the spec, and the
runner must name that rule (tests/integration/test_conformance_broken.py). Middlewares break
what a middleware can; `Tampered` servicers break the protocol itself.

Each overrides the reference only where its marker (or the lack of one) is involved, so
every other rule still passes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc

from hookmesh.agent import tool
from hookmesh.conformance import ConformanceMiddleware, ObservingConformanceMiddleware
from hookmesh.conformance._middleware import ConformanceError, marker
from hookmesh.middleware import HookMode, Middleware, PermissionDecision
from hookmesh.models import ModelResponse
from hookmesh.remote import pass_rest
from hookmesh.remote._host import MiddlewareServicer
from hookmesh.schema import CustomEvent, MessageKind, make_assistant
from hookmesh.v1 import content_pb2
from hookmesh.v1 import event_pb2 as ev
from hookmesh.v1 import middleware_pb2 as pb


async def _events(next_handler: Any, **overrides: Any) -> AsyncIterator[Any]:
    async for event in next_handler(**overrides):
        yield event


def _custom(agent: Any, name: str) -> CustomEvent:
    return CustomEvent(reply_id=agent.reply_id, name=name)


class _OnReasoning(ConformanceMiddleware):
    """Breaks on_reasoning for one marker (`word`) via `broken`."""

    word = ""

    def on_reasoning(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == self.word:
            return self.broken(agent, next_handler)
        return super().on_reasoning(agent, kwargs, next_handler)

    def broken(self, agent: Any, next_handler: Any) -> Any:
        raise NotImplementedError


class IgnoresEmit(_OnReasoning):
    """Treats the `emit` marker as no marker: on_reasoning emits nothing."""

    word = "emit"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class DropsEvents(_OnReasoning):
    """Drops every event of an on_reasoning invocation without a marker: it breaks the
    pass-through rule (a sidecar must keep what it was not asked to drop)."""

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        async for _ in next_handler():
            pass
        return
        yield  # an async generator that yields nothing


class EmitsUnasked(_OnReasoning):
    """Emits an event on an invocation without a marker."""

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        yield _custom(agent, "unasked")
        async for event in next_handler():
            yield event


class OverridesUnasked(_OnReasoning):
    """Overrides tool_choice on an invocation without a marker."""

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler, tool_choice="none")


class NeverCallsNext(_OnReasoning):
    """Answers an invocation without a marker with done, never calling the downstream."""

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        return
        yield


class IgnoresShortCircuit(_OnReasoning):
    """Calls the downstream despite the `short-circuit` marker."""

    word = "short-circuit"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class ShortCircuitsSilently(_OnReasoning):
    """Short-circuits without the `conformance.short_circuit` event."""

    word = "short-circuit"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        return
        yield


class IgnoresOverride(_OnReasoning):
    """Calls the downstream unchanged despite the `override` marker."""

    word = "override"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class OverridesWrongly(_OnReasoning):
    """Overrides tool_choice to ``required`` instead of ``none``."""

    word = "override"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler, tool_choice="required")


class EmitsOnlyBefore(_OnReasoning):
    """Emits `conformance.pre` but not `conformance.post`."""

    word = "emit"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        yield _custom(agent, "conformance.pre")
        async for event in next_handler():
            yield event


class IgnoresDrop(_OnReasoning):
    """Keeps every event despite the `drop` marker."""

    word = "drop"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class ForgetsState(_OnReasoning):
    """Changes no state for the `state` marker."""

    word = "state"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class LosesState(_OnReasoning):
    """Counts for the `state` marker but loses the slice's other keys."""

    word = "state"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        state = self.state(agent)
        count = int(state.get("count", 0)) + 1
        state.clear()
        state["count"] = count
        return _events(next_handler)


class IgnoresFinal(_OnReasoning):
    """Wraps the downstream despite the `final` marker (so call_next is not final)."""

    word = "final"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class FailsWithAnotherReason(_OnReasoning):
    """Fails the `error` marker with reason ``OTHER``."""

    word = "error"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        raise _Other("conformance error", metadata={"hook": "on_reasoning"})


class _Other(ConformanceError):
    reason = "OTHER"


class FailsWithoutTheHook(_OnReasoning):
    """Fails the `error` marker without the ``hook`` metadata."""

    word = "error"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        raise ConformanceError("conformance error")


class FailsWithAnEarlierReason(_OnReasoning):
    """Fails the `error` marker with reason ``CONFORMANCE``, which sorts before the spec's."""

    word = "error"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        raise _Truncated("conformance error", metadata={"hook": "on_reasoning"})


class _Truncated(ConformanceError):
    reason = "CONFORMANCE"


class EmitsBeforeTheError(_OnReasoning):
    """Not broken: emits an event of its own before failing for `error`."""

    word = "error"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        yield _custom(agent, "conformance.failing")
        raise ConformanceError("conformance error", metadata={"hook": "on_reasoning"})


class IgnoresErrorAfter(_OnReasoning):
    """Ends well despite the `error-after` marker."""

    word = "error-after"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class IgnoresReplyEmit(ConformanceMiddleware):
    """Emits nothing on on_reply for the `emit` marker."""

    def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "emit":
            return _events(next_handler)
        return super().on_reply(agent, kwargs, next_handler)


class OverridesActingWrongly(ConformanceMiddleware):
    """Overrides the tool call's arguments with other values."""

    def on_acting(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "override":
            return _events(next_handler, arguments={"text": "other"})
        return super().on_acting(agent, kwargs, next_handler)


class IgnoresActingFinal(ConformanceMiddleware):
    """Runs the tool call as without a marker despite the `final` marker."""

    def on_acting(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "final":
            return _events(next_handler)
        return super().on_acting(agent, kwargs, next_handler)


class ForgetsReplyState(ConformanceMiddleware):
    """Sends no state for on_reply's `state` marker."""

    def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "state":
            return _events(next_handler)
        return super().on_reply(agent, kwargs, next_handler)


class IgnoresModelToolChoice(ConformanceMiddleware):
    """Calls the model unchanged despite the `override` marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "override":
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelEmitsOnlyBefore(ConformanceMiddleware):
    """Emits `conformance.pre` but not `conformance.post` around a model call."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "emit":
            agent.emit(_custom(agent, "conformance.pre"))
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelEmitsAnExtraEventBefore(ConformanceMiddleware):
    """Emits `conformance.pre` and an event more than the spec's before a model call."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "emit":
            agent.emit(_custom(agent, "conformance.pre"))
            agent.emit(_custom(agent, "conformance.extra"))
            result = await next_handler()
            agent.emit(_custom(agent, "conformance.post"))
            return result
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelEmitsAnExtraEventAfter(ConformanceMiddleware):
    """Emits `conformance.post` and an event more than the spec's after a model call."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "emit":
            agent.emit(_custom(agent, "conformance.pre"))
            result = await next_handler()
            agent.emit(_custom(agent, "conformance.post"))
            agent.emit(_custom(agent, "conformance.extra"))
            return result
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelIgnoresErrorAfter(ConformanceMiddleware):
    """Returns the model's response despite the `error-after` marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "error-after":
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class ReplyIgnoresErrorAfter(ConformanceMiddleware):
    """Ends on_reply well despite the `error-after` marker."""

    def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "error-after":
            return _events(next_handler)
        return super().on_reply(agent, kwargs, next_handler)


class ModelForgetsState(ConformanceMiddleware):
    """Calls the model without the `state` marker's mutation."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "state":
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelIgnoresError(ConformanceMiddleware):
    """Calls the model despite the `error` marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "error":
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class ModelFailsWithoutTheHook(ConformanceMiddleware):
    """Fails the model call's `error` marker without the ``hook`` metadata."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "error":
            raise ConformanceError("conformance error")
        return await super().on_model_call(agent, kwargs, next_handler)


class PermissionForgetsState(ConformanceMiddleware):
    """Checks the permission without the `state` marker's mutation."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "state":
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionCountsFromZero(ConformanceMiddleware):
    """Reads "count + 1 (0 when absent)" on the permission check as: absent stays 0."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "state":
            state = self.state(agent)
            state["count"] = int(state["count"]) + 1 if "count" in state else 0
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionIgnoresEmit(ConformanceMiddleware):
    """Emits nothing on the permission check's `emit` marker."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "emit":
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionEmitsOnlyBefore(ConformanceMiddleware):
    """Emits `conformance.pre` but not `conformance.post` around a permission check."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "emit":
            agent.emit(_custom(agent, "conformance.pre"))
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class DeniesSilently(ConformanceMiddleware):
    """Short-circuits the permission check without the `conformance.short_circuit` event."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            return PermissionDecision("deny", "short-circuited")
        return await super().on_check_permission(agent, kwargs, next_handler)


class EmitChangesTheDecision(ConformanceMiddleware):
    """Emits around the permission check for the `emit` marker, as asked, but then denies
    (after a state change of its own: a mutate, then the emit, then the done)."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        decision = await super().on_check_permission(agent, kwargs, next_handler)
        if marker(agent) == "emit":
            self.state(agent)["changed"] = True
            return PermissionDecision("deny", "changed")
        return decision


class EmitsBeforeItsError(_OnReasoning):
    """Not broken: emits an event of its own before failing for `error-after`."""

    word = "error-after"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        async for event in next_handler():
            yield event
        yield _custom(agent, "conformance.failing")
        raise ConformanceError("conformance error", metadata={"hook": "on_reasoning"})


class PermissionIgnoresShortCircuit(ConformanceMiddleware):
    """Checks the permission downstream despite the `short-circuit` marker (with its event)."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class ChangesTheDecisionAfterAMutate(ConformanceMiddleware):
    """Without a marker, denies what the downstream decided, after a state change."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        decision = await super().on_check_permission(agent, kwargs, next_handler)
        if marker(agent) == "":
            self.state(agent)["changed"] = True
            return PermissionDecision("deny", decision.reason)
        return decision


class DeniesWithAnExtraEvent(ConformanceMiddleware):
    """Short-circuits the permission check with an event more than the spec's."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            agent.emit(_custom(agent, "conformance.extra"))
            return PermissionDecision("deny", "short-circuited")
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionEmitsBeforeItsError(ConformanceMiddleware):
    """Not broken: emits an event of its own before failing for `error-after`."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "error-after":
            await next_handler()
            agent.emit(_custom(agent, "conformance.failing"))
            raise ConformanceError("conformance error", metadata={"hook": "on_check_permission"})
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionFailsWithAnotherReason(ConformanceMiddleware):
    """Fails the permission check's `error` marker with reason OTHER."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "error":
            raise _Other("other", metadata={"hook": "on_check_permission"})
        return await super().on_check_permission(agent, kwargs, next_handler)


class PermissionIgnoresErrorAfter(ConformanceMiddleware):
    """Returns the downstream's decision despite the `error-after` marker."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "error-after":
            decision: PermissionDecision = await next_handler()
            return decision
        return await super().on_check_permission(agent, kwargs, next_handler)


class CompressLosesState(ConformanceMiddleware):
    """Compresses without the `state` marker's mutation."""

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        if marker(agent) == "state":
            await next_handler()
            return
        await super().on_compress_context(agent, kwargs, next_handler)


class CompressIgnoresError(ConformanceMiddleware):
    """Compresses despite the `error` marker."""

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        if marker(agent) == "error":
            await next_handler()
            return
        await super().on_compress_context(agent, kwargs, next_handler)


class ChangesTheModelResponse(ConformanceMiddleware):
    """Replaces the downstream's full model response without a marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        result = await super().on_model_call(agent, kwargs, next_handler)
        if marker(agent) == "" and isinstance(result, ModelResponse):
            return ModelResponse(message=make_assistant(agent.kind, "changed"))
        return result


class ShortCircuitsWithTheWrongKind(ConformanceMiddleware):
    """Short-circuits a model call with a message of the other kind."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            other: MessageKind = "agentic" if agent.kind == "flat" else "flat"
            return ModelResponse(message=make_assistant(other, "short-circuited"))
        return await super().on_model_call(agent, kwargs, next_handler)


class PicksAnotherModel(ConformanceMiddleware):
    """Resolves the model ``slow`` for the `model` marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "model":
            return await next_handler(model=agent.resolve_model("slow"))
        return await super().on_model_call(agent, kwargs, next_handler)


class AllowsTheShortCircuit(ConformanceMiddleware):
    """Answers the permission `short-circuit` marker with allow."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            return PermissionDecision("allow", "short-circuited")
        return await super().on_check_permission(agent, kwargs, next_handler)


class DeniesWithAnotherReason(ConformanceMiddleware):
    """Denies the permission `short-circuit` marker with another reason (after a state
    change: the kit reads the done, not the message before it)."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            self.state(agent)["denied"] = True
            agent.emit(_custom(agent, "conformance.short_circuit"))
            return PermissionDecision("deny", "no")
        return await super().on_check_permission(agent, kwargs, next_handler)


class AsksAtTheShortCircuit(ConformanceMiddleware):
    """Answers the permission `short-circuit` marker with ask (which sorts after deny)."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            return PermissionDecision("ask", "short-circuited")
        return await super().on_check_permission(agent, kwargs, next_handler)


class DeniesWithALaterReason(ConformanceMiddleware):
    """Denies the permission `short-circuit` marker with a reason sorting after the spec's."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        if marker(agent) == "short-circuit":
            agent.emit(_custom(agent, "conformance.short_circuit"))
            return PermissionDecision("deny", "unsafe")
        return await super().on_check_permission(agent, kwargs, next_handler)


class ChangesTheDecision(ConformanceMiddleware):
    """Turns the downstream's permission decision into a denial without a marker."""

    async def on_check_permission(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> PermissionDecision:
        decision = await super().on_check_permission(agent, kwargs, next_handler)
        if marker(agent) == "":
            return PermissionDecision("deny", decision.reason)
        return decision


class IgnoresCompressEmit(ConformanceMiddleware):
    """Emits nothing when compressing with the `emit` marker."""

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        if marker(agent) == "emit":
            await next_handler()
            return
        await super().on_compress_context(agent, kwargs, next_handler)


class ForgetsTheWrongMessage(_OnReasoning):
    """Removes the last context message, not the first, for the `forget` marker."""

    word = "forget"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        del agent.state.context[-1]
        return _events(next_handler)


class WrongKey(ConformanceMiddleware):
    """Describes itself under another key."""

    def middleware_key(self) -> str:
        return "not-conformance"


class NoContext(ConformanceMiddleware):
    """Does not ask for the conversation context."""

    needs_context = False


class NoTools(ConformanceMiddleware):
    """Contributes no tool."""

    def list_tools(self) -> list[Any]:
        return []


class KeepsThePrompt(ConformanceMiddleware):
    """Does not append its suffix to the system prompt."""

    async def on_system_prompt(self, agent: Any, prompt: str) -> str:
        return prompt


class CountsInThePrompt(ConformanceMiddleware):
    """Changes its state while transforming the system prompt."""

    async def on_system_prompt(self, agent: Any, prompt: str) -> str:
        self.state(agent)["prompted"] = True
        return await super().on_system_prompt(agent, prompt)


class ForgetsAfterAgent(ConformanceMiddleware):
    """Does nothing after the agent."""

    async def after_agent(self, agent: Any, final: Any) -> None:
        return None


class FailsOpen(ConformanceMiddleware):
    """Prefers fail_open where the conformance middleware must fail closed."""

    failure_mode = "fail_open"


class CountsFromZero(_OnReasoning):
    """Reads "count + 1 (0 when absent)" as: an absent count stays 0."""

    word = "state"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        state = self.state(agent)
        state["count"] = int(state["count"]) + 1 if "count" in state else 0
        return _events(next_handler)


@tool(read_only=True, name="conformance_echo")
async def _hello(text: str) -> AsyncIterator[str]:
    """Always says hello.

    Args:
        text: Ignored.
    """
    yield "hello"


class EchoesHello(ConformanceMiddleware):
    """Its echo tool streams "hello" whatever it is given."""

    def list_tools(self) -> list[Any]:
        return [_hello]


# --- broken at the message level: the reference host's stream, tampered with ---------------------


class Tampered(MiddlewareServicer):
    """The Python host serving the reference, with `requests` and `answers` to override: the
    protocol-level breaks a Middleware cannot make (the host keeps those right)."""

    def __init__(self, middleware: Middleware | None = None) -> None:
        super().__init__(middleware or ConformanceMiddleware())

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        """Sees each agent message; `send` adds an answer of its own."""

    def passes(self, request: pb.InterceptRequest) -> bool:
        """Whether the reference sees the agent message (all pass here)."""
        return True

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        """What is sent for each answer of the reference."""
        return [response]

    def route(self, response: pb.InterceptResponse, own: asyncio.Queue[Any]) -> asyncio.Queue[Any]:
        return own

    async def after_close(self) -> None:
        """Runs when the agent closed its side, before the stream may end."""

    async def Intercept(self, requests: Any, context: Any) -> AsyncIterator[Any]:
        out: asyncio.Queue[Any] = asyncio.Queue()

        async def tap() -> AsyncIterator[pb.InterceptRequest]:
            async for request in requests:
                self.requested(request, out.put_nowait)
                if self.passes(request):
                    yield request
            await self.after_close()

        async def pump() -> None:
            async for response in super(Tampered, self).Intercept(tap(), context):
                for answer in self.answers(response):
                    self.route(answer, out).put_nowait(answer)
            out.put_nowait(None)

        pumping = asyncio.create_task(pump())
        try:
            while (answer := await out.get()) is not None:
                yield answer
        finally:
            pumping.cancel()


class DoublesDone(Tampered):
    """Sends every done twice."""

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        return [response, response] if response.HasField("done") else [response]


class EmitsForAnotherReply(Tampered):
    """Stamps its emits with another reply's id."""

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if response.HasField("emit"):
            response.emit.reply_id = "another-reply"
        return [response]


class VerdictsForChunks(Tampered):
    """Answers each model chunk with a verdict (chunks are always read-only)."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("item") and request.item.HasField("chunk"):
            send(pb.InterceptResponse(invocation_id=request.invocation_id, verdict={}))


class AnswersLateAfterCancel(Tampered):
    """Sends a done 0.6 s after each cancel."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("cancel"):
            late = pb.InterceptResponse(invocation_id=request.invocation_id, done={})
            asyncio.get_running_loop().call_later(0.6, send, late)


class _EndsEarly(Tampered):
    """Ends an invocation with a plain done unasked where `ends` says, and then sends
    nothing more for it: allowed by the protocol."""

    emit_first = False

    def __init__(self) -> None:
        super().__init__()
        self.hooks: dict[str, int] = {}
        self.ended: set[str] = set()

    def ends(self, request: pb.InterceptRequest, hook: int) -> bool:
        raise NotImplementedError

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        iid = request.invocation_id
        if request.HasField("invocation"):
            self.ended.discard(iid)
            self.hooks[iid] = request.invocation.hook
        elif iid not in self.ended and self.ends(request, self.hooks.get(iid, 0)):
            self.ended.add(iid)
            if self.emit_first:
                ending = ev.AgentEvent(custom=ev.CustomEvent(name="ending"))
                send(pb.InterceptResponse(invocation_id=iid, emit=ending))
            send(pb.InterceptResponse(invocation_id=iid, done={}))

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        return [] if response.invocation_id in self.ended else [response]


class DoneAfterStreamStart(_EndsEarly):
    """Ends a model stream with a plain done as soon as it starts."""

    def ends(self, request: pb.InterceptRequest, hook: int) -> bool:
        return request.HasField("outcome") and request.outcome.HasField("stream_start")


class DoneAtReadOnlyItems(_EndsEarly):
    """Ends an on_reply invocation at its first (read-only) item, with an emit first."""

    emit_first = True

    def ends(self, request: pb.InterceptRequest, hook: int) -> bool:
        return request.HasField("item") and hook == pb.HOOK_ON_REPLY


_SHARED: dict[str, asyncio.Queue[Any]] = {}


class SharesInvocations(Tampered):
    """Keeps one invocation map for all its streams: an id's first stream gets its answers.
    It forgets an id at its done or cancel, so only streams open at once mix up."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("cancel"):
            _SHARED.pop(request.invocation_id, None)

    async def after_close(self) -> None:
        _SHARED.clear()

    def route(self, response: pb.InterceptResponse, own: asyncio.Queue[Any]) -> asyncio.Queue[Any]:
        queue = _SHARED.setdefault(response.invocation_id, own)
        if response.HasField("done"):
            _SHARED.pop(response.invocation_id, None)
        return queue


class NeverEndsTheStream(Tampered):
    """Keeps its side of the stream open after the agent closed its own."""

    async def after_close(self) -> None:
        await asyncio.Event().wait()


class LenientArguments(MiddlewareServicer):
    """Answers bad CallTool arguments with an error result instead of INVALID_ARGUMENT."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    async def CallTool(self, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            text = json.loads(request.arguments)["text"]
            valid = isinstance(text, str)
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            yield pb.CallToolResponse(text="Error: bad arguments")
            yield pb.CallToolResponse(end=content_pb2.TOOL_RESULT_STATE_ERROR)
            return
        async for piece in super().CallTool(request, context):
            yield piece


class IgnoresRetry(_OnReasoning):
    """Lets the downstream's failure stand despite the `retry` marker."""

    word = "retry"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class IgnoresFinalVerdict(_OnReasoning):
    """Answers the first item with a plain verdict despite the `final-verdict` marker."""

    word = "final-verdict"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class EmitsAfterPassRest(_OnReasoning):
    """Not broken: yields its own event after the rest passed; the host must not send it."""

    word = "final-verdict"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        async for event in pass_rest(next_handler()):
            yield event
        yield _custom(agent, "conformance.too_late")


class IgnoresStop(_OnReasoning):
    """Runs the whole downstream despite the `stop` marker."""

    word = "stop"

    def broken(self, agent: Any, next_handler: Any) -> Any:
        return _events(next_handler)


class StopsSilently(_OnReasoning):
    """Stops at the first item for the `stop` marker without `conformance.stopped`."""

    word = "stop"

    async def broken(self, agent: Any, next_handler: Any) -> Any:
        async for _ in next_handler():
            return
        yield


class StreamsOnDespiteStop(ConformanceMiddleware):
    """Lets the model stream run to its end despite the `stop` marker."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        if marker(agent) == "stop":
            return await next_handler()
        return await super().on_model_call(agent, kwargs, next_handler)


class _Final(Tampered):
    """Makes every verdict final (`final_verdicts`) and follows each final answer with a
    done (`done_after_final`)."""

    final_verdicts = False
    done_after_final = False

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if self.final_verdicts and response.HasField("verdict"):
            response.verdict.final = True
        final = (response.HasField("verdict") and response.verdict.final) or (
            response.HasField("call_next") and response.call_next.final
        )
        if final and self.done_after_final:
            return [response, pb.InterceptResponse(invocation_id=response.invocation_id, done={})]
        return [response]


class FinalVerdicts(_Final):
    """Says "I need nothing more" (verdict.final) at every verdict: allowed by the protocol,
    but the conformance middleware needs the outcome of an invocation without a marker."""

    final_verdicts = True


class DoneAfterFinal(_Final):
    """Sends a done after its final call_next, which already ended the invocation."""

    done_after_final = True


class DoneAfterFinalVerdicts(_Final):
    """Makes every verdict final, then sends a done anyway."""

    final_verdicts = True
    done_after_final = True


class AnswersUnstarted(Tampered):
    """Follows each done with one for an invocation the agent never sent."""

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if response.HasField("done"):
            return [response, pb.InterceptResponse(invocation_id="never-sent", done={})]
        return [response]


class AnswersAfterItsDone(Tampered):
    """Answers the outcome of an invocation it ended unasked (before its last outcome) with a
    done of its own, as a sidecar that forgets nothing would."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: set[str] = set()
        self.unasked: set[str] = set()

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if response.HasField("done") and response.invocation_id not in self.outcomes:
            self.unasked.add(response.invocation_id)
        return [response]

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        iid = request.invocation_id
        if request.HasField("invocation"):
            self.outcomes.discard(iid)
            self.unasked.discard(iid)
        elif request.HasField("outcome") and not request.outcome.HasField("stream_start"):
            self.outcomes.add(iid)
            if iid in self.unasked:
                send(pb.InterceptResponse(invocation_id=iid, done={}))


class Observer(Middleware):
    """Watches replies and model calls in observe mode (the agent never waits for it)."""

    hook_modes: Mapping[str, HookMode] = {"on_reply": "observe", "on_model_call": "observe"}
    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": ("*",), "on_model_call": ("chunk",)}

    def middleware_key(self) -> str:
        return "observer"

    def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        return _events(next_handler)

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        return await next_handler()


class ObservedPlainly(Tampered):
    """The Python host serving the observer: nothing is ever sent back."""

    def __init__(self) -> None:
        super().__init__(Observer())


class MutatesWhileObserving(ObservedPlainly):
    """Sends a state mutation for each observed invocation."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("invocation"):
            mutation = pb.StateMutation()
            mutation.state.update({"seen": 1})
            send(pb.InterceptResponse(invocation_id=request.invocation_id, mutate=mutation))


class AnswersObservedOutcomes(ObservedPlainly):
    """Answers each observed outcome with a done."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("outcome"):
            send(pb.InterceptResponse(invocation_id=request.invocation_id, done={}))


class ObservingPlainly(Tampered):
    """The Python host serving the observing conformance middleware: sends nothing back."""

    def __init__(self) -> None:
        super().__init__(ObservingConformanceMiddleware())


class EmitsWhileObservingReasoning(ObservingPlainly):
    """Emits for each observed on_reasoning invocation (an observer cannot change a reply)."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("invocation") and request.invocation.hook == pb.HOOK_ON_REASONING:
            emitted = ev.AgentEvent(custom=ev.CustomEvent(name="seen"))
            send(pb.InterceptResponse(invocation_id=request.invocation_id, emit=emitted))


class DonesObservedPermissions(ObservingPlainly):
    """Answers each observed permission outcome with a done."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("outcome") and request.outcome.HasField("permission"):
            send(pb.InterceptResponse(invocation_id=request.invocation_id, done={}))


class PlainDones(Tampered):
    """Not broken: answers an outcome with a plain done where the reference repeats the
    downstream's result (the same meaning: "unchanged")."""

    def __init__(self) -> None:
        super().__init__()
        self.called_next: set[str] = set()

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if response.HasField("call_next"):
            self.called_next.add(response.invocation_id)
        elif response.HasField("done") and response.invocation_id in self.called_next:
            self.called_next.discard(response.invocation_id)
            if response.done.WhichOneof("result") in ("model_response", "permission"):
                response.done.Clear()
        return [response]


# --- broken where the stream rules look: the description, the stream's ends, the unary RPCs
# and the tool ---------------------------------------------------------------------------------


class Redescribed(MiddlewareServicer):
    """The Python host serving the reference, its description edited by `edit`."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())
        edited = pb.DescribeResponse()
        edited.CopyFrom(self.description)
        self.edit(edited)
        self.description = edited

    def edit(self, d: pb.DescribeResponse) -> None:
        """Changes the reference's description in place (nothing here)."""


class SpeaksVersion2(Redescribed):
    """Answers Describe with protocol version 2, which the kit does not speak."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.protocol_version = 2


class SpeaksNoVersion(Redescribed):
    """Leaves the protocol version unset (0)."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.protocol_version = 0


class KeyBeforeConformance(Redescribed):
    """Describes itself under a key that sorts before ``conformance``."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.middleware_key = "agent"


class LeavesTheFailureModeUnset(Redescribed):
    """Not broken: an unset failure mode reads as FAILURE_MODE_CLOSED."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.failure_mode = pb.FAILURE_MODE_UNSPECIFIED


class DescribesAnotherTool(Redescribed):
    """Describes a tool of its own after conformance_echo."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.tools.add(name="extra_tool", read_only=True)


class WritableEcho(Redescribed):
    """Describes conformance_echo as a tool that changes things (not read_only)."""

    def edit(self, d: pb.DescribeResponse) -> None:
        d.tools[0].read_only = False


class ReplyPreOnly(Redescribed):
    """Describes on_reply as PRE_ONLY."""

    def edit(self, d: pb.DescribeResponse) -> None:
        for h in d.hooks:
            if h.hook == pb.HOOK_ON_REPLY:
                h.mode = pb.HOOK_MODE_PRE_ONLY


class Negotiating(MiddlewareServicer):
    """Not broken: speaks protocol versions 1 and 2, answers Describe with the highest the
    agent speaks too, and refuses an agent that names no version it knows."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    async def Describe(self, request: Any, context: Any) -> pb.DescribeResponse:
        if request.protocol_version < 1:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no protocol version")
        answer = pb.DescribeResponse()
        answer.CopyFrom(self.description)
        answer.protocol_version = min(request.protocol_version, 2)
        return answer


class IgnoresCancel(Tampered):
    """Never hands a cancel to the hook: a cancelled invocation runs on to its answers."""

    def passes(self, request: pb.InterceptRequest) -> bool:
        return not request.HasField("cancel")


class AnswersAtTheDeadline(Tampered):
    """Ends each invocation with a done when its message_timeout passes, though the agent,
    not the sidecar, acts on a missed deadline (with a cancel)."""

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("invocation"):
            seconds = request.invocation.message_timeout.ToTimedelta().total_seconds()
            late = pb.InterceptResponse(invocation_id=request.invocation_id, done={})
            asyncio.get_running_loop().call_later(seconds, send, late)


class AnswersUnknownInvocations(Tampered):
    """Answers an outcome for an invocation it never saw with a done of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.started: set[str] = set()

    def requested(self, request: pb.InterceptRequest, send: Callable[[Any], None]) -> None:
        if request.HasField("invocation"):
            self.started.add(request.invocation_id)
        elif request.HasField("outcome") and request.invocation_id not in self.started:
            send(pb.InterceptResponse(invocation_id=request.invocation_id, done={}))


class EmitsBeforeEachCallNext(Tampered):
    """Emits an event of its own before each call_next (unasked, without a marker)."""

    def answers(self, response: pb.InterceptResponse) -> list[pb.InterceptResponse]:
        if not response.HasField("call_next"):
            return [response]
        emitted = ev.AgentEvent(custom=ev.CustomEvent(name="unasked"))
        return [pb.InterceptResponse(invocation_id=response.invocation_id, emit=emitted), response]


class FailsAtClose(Tampered):
    """Ends the stream with INTERNAL, not OK, once the agent closed its side."""

    async def Intercept(self, requests: Any, context: Any) -> AsyncIterator[Any]:
        async for answer in super().Intercept(requests, context):
            yield answer
        await context.abort(grpc.StatusCode.INTERNAL, "closing")


class PromptsTwice(ConformanceMiddleware):
    """Appends its suffix to the system prompt twice."""

    async def on_system_prompt(self, agent: Any, prompt: str) -> str:
        once = await super().on_system_prompt(agent, prompt)
        return await super().on_system_prompt(agent, once)


class AfterAgentWithoutFinal(MiddlewareServicer):
    """Answers AfterAgent without a final message with no mutation, instead of refusing it."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    async def AfterAgent(self, request: Any, context: Any) -> pb.AfterAgentResponse:
        if not request.HasField("final_message"):
            return pb.AfterAgentResponse()
        return await super().AfterAgent(request, context)


class AfterAgentFailsOtherwise(MiddlewareServicer):
    """Refuses AfterAgent without a final message with FAILED_PRECONDITION."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    async def AfterAgent(self, request: Any, context: Any) -> pb.AfterAgentResponse:
        if not request.HasField("final_message"):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no final message")
        return await super().AfterAgent(request, context)


class ToolTampered(MiddlewareServicer):
    """The reference's CallTool, its pieces changed by `pieces` (for the echo's text as
    parsed; None when the arguments are bad) and unknown tools answered by `unknown`."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        return real

    async def unknown(self, context: Any) -> list[pb.CallToolResponse]:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such tool")
        return []

    async def CallTool(self, request: Any, context: Any) -> AsyncIterator[Any]:
        if request.name != "conformance_echo":
            for piece in await self.unknown(context):
                yield piece
            return
        try:
            text = json.loads(request.arguments)["text"]
        except (ValueError, KeyError, TypeError):
            text = None
        real = [piece async for piece in super().CallTool(request, context)]
        for piece in self.pieces(text if isinstance(text, str) else None, real):
            yield piece


def _ended(real: list[pb.CallToolResponse], end: int) -> list[pb.CallToolResponse]:
    return [*real[:-1], pb.CallToolResponse(end=end)]  # type: ignore[arg-type]


class EchoesTwice(ToolTampered):
    """Streams the echoed text twice."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        return [*real[:-1], *real[:-1], real[-1]]


class StreamsInPieces(ToolTampered):
    """Not broken: streams each text in two pieces (the echo's and the failure's)."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        out: list[pb.CallToolResponse] = []
        for piece in real:
            if piece.WhichOneof("piece") != "text":
                out.append(piece)
                continue
            half = len(piece.text) // 2
            out.append(pb.CallToolResponse(text=piece.text[:half]))
            out.append(pb.CallToolResponse(text=piece.text[half:]))
        return out


class EchoEndsWithAnEmptyPiece(ToolTampered):
    """Ends the echo with an empty piece (no arm set) in place of `end`."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        return [*real[:-1], pb.CallToolResponse()] if text != "fail" else real


class EchoEndsWithText(ToolTampered):
    """Ends the echo with its text, never sending `end`."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        return real[:-1] if text != "fail" else real


class EchoEndsWithError(ToolTampered):
    """Ends every echo with ERROR."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        return _ended(real, content_pb2.TOOL_RESULT_STATE_ERROR)


class FailEndsWithSuccess(ToolTampered):
    """Ends the failing echo ("fail") with SUCCESS."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        if text == "fail":
            return _ended(real, content_pb2.TOOL_RESULT_STATE_SUCCESS)
        return real


class FailEndsInterrupted(ToolTampered):
    """Ends the failing echo ("fail") with INTERRUPTED, not ERROR."""

    def pieces(
        self, text: str | None, real: list[pb.CallToolResponse]
    ) -> list[pb.CallToolResponse]:
        if text == "fail":
            return _ended(real, content_pb2.TOOL_RESULT_STATE_INTERRUPTED)
        return real


class BadArgumentsCrash(ToolTampered):
    """Fails a call with bad arguments with INTERNAL, not INVALID_ARGUMENT."""

    async def CallTool(self, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            json.loads(request.arguments)
        except ValueError:
            await context.abort(grpc.StatusCode.INTERNAL, "crashed")
        async for piece in super().CallTool(request, context):
            yield piece


class EchoesNumbers(ToolTampered):
    """Echoes a number given as the text instead of refusing it."""

    async def CallTool(self, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            text = json.loads(request.arguments).get("text")
        except ValueError:
            text = None
        if isinstance(text, int):
            yield pb.CallToolResponse(text=str(text))
            yield pb.CallToolResponse(end=content_pb2.TOOL_RESULT_STATE_SUCCESS)
            return
        async for piece in super().CallTool(request, context):
            yield piece


class UnknownToolUnimplemented(ToolTampered):
    """Fails a call of an unknown tool with UNIMPLEMENTED, not NOT_FOUND."""

    async def unknown(self, context: Any) -> list[pb.CallToolResponse]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no such tool")
        return []


class UnknownToolAnswered(ToolTampered):
    """Answers a call of an unknown tool with an error result instead of NOT_FOUND."""

    async def unknown(self, context: Any) -> list[pb.CallToolResponse]:
        return [
            pb.CallToolResponse(text="no such tool"),
            pb.CallToolResponse(end=content_pb2.TOOL_RESULT_STATE_ERROR),
        ]


class RefusesWithoutTokenOtherwise(MiddlewareServicer):
    """Refuses a call without the bearer token with PERMISSION_DENIED, not UNAUTHENTICATED."""

    def __init__(self) -> None:
        super().__init__(ConformanceMiddleware())

    async def Describe(self, request: Any, context: Any) -> pb.DescribeResponse:
        if ("authorization", "Bearer s3cret") not in tuple(context.invocation_metadata()):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "who are you")
        return self.description
