"""Driving the awaitable hooks (on_model_call, on_check_permission, on_compress_context)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from functools import partial
from typing import Any

from hookmesh.middleware import PermissionDecision
from hookmesh.models import STOP_CUT, ModelChunk, ModelResponse, ModelResult
from hookmesh.remote import _codec as c
from hookmesh.remote._changes import overrides
from hookmesh.remote._errors import protocol_error
from hookmesh.remote._invocation import DownstreamStopped, _Invocation, close_downstream
from hookmesh.remote._subscriptions import Routes
from hookmesh.v1 import middleware_pb2 as _mw_pb2

_STREAM_START = _mw_pb2.StreamStart()
_STREAM_END = _mw_pb2.StreamEnd()


def _emit(inv: _Invocation, events: list[Any]) -> None:
    for event in events:
        inv.agent.emit(event)


async def _below(inv: _Invocation, downstream: Awaitable[Any]) -> Any:
    """Await the downstream; its error passes up as its own, never blamed on the sidecar."""
    try:
        return await downstream
    except BaseException as exc:
        inv.passing(exc)
        raise


async def drive_model_call(
    inv: _Invocation,
    routes: Routes,
    kwargs: Mapping[str, Any],
    next_handler: Any,
) -> ModelResult:
    """One on_model_call invocation; a streamed answer continues in `_relay_stream`."""
    finished = False
    try:
        if routes.mode == "observe":
            result = await _below(inv, next_handler())
            finished = True
            if isinstance(result, ModelResponse):
                inv.outcome(model_response=c.response_to_pb(result))
                return result
            inv.outcome(stream_start=_STREAM_START)
            return _relay_stream(inv, result, routes, observe=True)
        events, message = await inv.wait("call_next")
        _emit(inv, events)
        if message.WhichOneof("message") == "done":
            finished = True
            if message.done.WhichOneof("result") != "model_response":
                raise protocol_error(
                    "a short-circuiting on_model_call must return a model response",
                    hook=inv.hook,
                )
            return c.response_from_pb(message.done.model_response)
        call_next = message.call_next
        changed = overrides(inv.link.owner, inv.hook, call_next, inv.agent, kwargs)
        if routes.mode == "pre_only" or call_next.final:
            finished = True
            inv.close(cancel=False)
            return await _below(inv, next_handler(**changed))  # type: ignore[no-any-return]
        result = await _attempt(inv, kwargs, next_handler, changed)
        if isinstance(result, ModelResponse):
            inv.outcome(model_response=c.response_to_pb(result))
            events, message = await inv.wait("done")
            _emit(inv, events)
            finished = True
            if message.done.WhichOneof("result") == "model_response":
                return c.response_from_pb(message.done.model_response)
            return result
        inv.outcome(stream_start=_STREAM_START)
        finished = True
        return _relay_stream(inv, result, routes, observe=False, retry=(kwargs, next_handler))
    except BaseException as exc:
        inv.own(exc)
        raise
    finally:
        if not finished:
            inv.close(cancel=True)


async def _attempt(
    inv: _Invocation,
    kwargs: Mapping[str, Any],
    next_handler: Any,
    changed: dict[str, Any],
) -> ModelResult:
    """Run the downstream; after an error outcome the sidecar may answer with another
    call_next (a retry, perhaps with other overrides) instead of done."""
    while True:
        try:
            return await inv.downstream(partial(next_handler, **changed))
        except DownstreamStopped:
            # The sidecar ended the hook while the model ran (its deadline): its done
            # is the answer (a done with an error raises it).
            events, message = await inv.wait("done")
            _emit(inv, events)
            if message.done.WhichOneof("result") != "model_response":
                raise protocol_error(
                    "a done sent while the model ran must carry a model response or an error",
                    hook=inv.hook,
                ) from None
            return c.response_from_pb(message.done.model_response)
        except Exception as exc:
            if exc is inv.broken:
                raise
            inv.passing(exc)
            inv.outcome(error=c.error_to_pb(exc))
            events, message = await inv.wait("done", "call_next", failed=True)
            _emit(inv, events)
            if message.WhichOneof("message") != "call_next":
                raise
            changed = overrides(inv.link.owner, inv.hook, message.call_next, inv.agent, kwargs)


async def _relay_stream(
    inv: _Invocation,
    stream: AsyncIterator[Any],
    routes: Routes,
    observe: bool,
    retry: tuple[Mapping[str, Any], Any] | None = None,
) -> AsyncIterator[Any]:
    """Relay a model stream, sending subscribed chunks (never awaited), then stream_end.

    A stream that fails before its first chunk may be run again: the sidecar answers the
    error outcome with call_next instead of done (`retry`: the kwargs and the handler)."""
    finished = observe
    chunks = routes.sends("chunk")
    relayed = False
    try:
        iterator = aiter(stream)
        while True:
            try:
                chunk = await (anext(iterator) if observe else inv.pull(iterator))
            except StopAsyncIteration:
                break
            except DownstreamStopped:
                # The sidecar ended the hook mid-stream (its deadline): a done with an
                # error raises it; a plain done ends the stream here. A model response
                # cannot replace a stream already under way.
                await close_downstream(iterator)
                events, message = await inv.wait("done")
                _emit(inv, events)
                finished = True
                if message.done.WhichOneof("result") == "model_response":
                    raise protocol_error(
                        "a done sent during a model stream may not carry a model response",
                        hook=inv.hook,
                    ) from None
                if relayed:
                    yield ModelChunk(stop_reason=STOP_CUT)
                return
            except Exception as exc:
                if exc is inv.broken:
                    raise
                inv.passing(exc)
                if observe:
                    raise
                inv.outcome(error=c.error_to_pb(exc))
                expected = ("done", "call_next") if retry and not relayed else ("done",)
                events, message = await inv.wait(*expected, failed=True)
                _emit(inv, events)
                if message.WhichOneof("message") != "call_next" or retry is None:
                    finished = True
                    raise
                kwargs, next_handler = retry
                changed = overrides(inv.link.owner, inv.hook, message.call_next, inv.agent, kwargs)
                again = await _attempt(inv, kwargs, next_handler, changed)
                if isinstance(again, ModelResponse):
                    raise protocol_error(
                        "a retried model stream came back as a full response", hook=inv.hook
                    ) from None
                inv.outcome(stream_start=_STREAM_START)
                iterator = aiter(again)
                continue
            if chunks:
                inv.item(False, chunk=c.chunk_to_pb(chunk))
            relayed = True
            yield chunk
        inv.outcome(stream_end=_STREAM_END)
        if observe:
            return
        events, message = await inv.wait("done")
        _emit(inv, events)
        finished = True
        if message.done.WhichOneof("result") == "model_response":
            raise protocol_error(
                "done answering stream_end may not carry a model response: the chunks "
                "already went upstream",
                hook=inv.hook,
            )
    except BaseException as exc:
        inv.own(exc)
        raise
    finally:
        inv.close(cancel=not finished)


async def drive_permission(
    inv: _Invocation, routes: Routes, next_handler: Any
) -> PermissionDecision:
    """One on_check_permission invocation."""
    finished = False
    try:
        if routes.mode == "observe":
            decision = await _below(inv, next_handler())
            inv.outcome(permission=c.decision_to_pb(decision))
            finished = True
            return decision  # type: ignore[no-any-return]
        events, message = await inv.wait("call_next")
        _emit(inv, events)
        decision = None
        if message.WhichOneof("message") == "call_next":
            overrides(inv.link.owner, inv.hook, message.call_next, inv.agent, {})
            if routes.mode == "pre_only" or message.call_next.final:
                finished = True
                inv.close(cancel=False)
                return await _below(inv, next_handler())  # type: ignore[no-any-return]
            decision = await _below(inv, next_handler())
            assert decision is not None
            inv.outcome(permission=c.decision_to_pb(decision))
            events, message = await inv.wait("done")
            _emit(inv, events)
        finished = True
        if message.done.WhichOneof("result") == "permission":
            return c.decision_from_pb(message.done.permission)
        if decision is None:
            raise protocol_error(
                "a short-circuiting on_check_permission must return a decision", hook=inv.hook
            )
        return decision
    except BaseException as exc:
        inv.own(exc)
        raise
    finally:
        inv.close(cancel=not finished)


async def drive_compress(inv: _Invocation, routes: Routes, next_handler: Any) -> None:
    """One on_compress_context invocation."""
    finished = False
    try:
        if routes.mode == "observe":
            await _below(inv, next_handler())
            inv.outcome(stream_end=_STREAM_END)
            finished = True
            return
        events, message = await inv.wait("call_next")
        if message.WhichOneof("message") == "call_next":
            overrides(inv.link.owner, inv.hook, message.call_next, inv.agent, {})
            if routes.mode == "pre_only" or message.call_next.final:
                _emit(inv, events)
                finished = True
                inv.close(cancel=False)
                await _below(inv, next_handler())
                return
            await _below(inv, next_handler())
            inv.outcome(stream_end=_STREAM_END)
            more, _ = await inv.wait("done")
            events.extend(more)
        _emit(inv, events)
        finished = True
    except BaseException as exc:
        inv.own(exc)
        raise
    finally:
        inv.close(cancel=not finished)
