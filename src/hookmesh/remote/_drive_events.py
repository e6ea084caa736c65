"""Driving an event hook (on_reply, on_reasoning, on_acting) through a sidecar."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from hookmesh.remote import _codec as c
from hookmesh.remote._changes import overrides
from hookmesh.remote._invocation import DownstreamStopped, _Invocation, close_downstream
from hookmesh.remote._subscriptions import PASS, READ_ONLY, Routes
from hookmesh.schema import AgentEvent, event_to_proto
from hookmesh.v1 import middleware_pb2 as _mw_pb2

_STREAM_END = _mw_pb2.StreamEnd()
_AFTER_END = {"on_reply": ("done",)}
"""What may answer stream_end where a retry is not allowed (by hook)."""


async def drive_events(
    inv: _Invocation,
    routes: Routes,
    kwargs: Mapping[str, Any],
    next_handler: Callable[..., AsyncIterator[AgentEvent]],
) -> AsyncIterator[AgentEvent]:
    """One event-hook invocation: pre phase, items as they pass, post phase."""
    hook = inv.hook
    finished = False
    try:
        if routes.mode == "observe":
            pull = next_handler().__anext__
            while True:
                try:
                    event = await pull()
                except StopAsyncIteration:
                    break
                except BaseException as exc:
                    inv.passing(exc)
                    raise
                if routes.sends(event.type):
                    inv.item(False, event=event_to_proto(event))
                yield event
            inv.outcome(stream_end=_STREAM_END)
            finished = True
            return
        events, message = await inv.wait("call_next")
        for event in events:
            yield event
        while message.WhichOneof("message") == "call_next":
            # NOTE(hookmesh): a call_next in answer to the post phase runs the downstream
            # again (a retry); the sidecar held what it wanted to hide of the last run.
            call_next = message.call_next
            stream = next_handler(**overrides(inv.link.owner, hook, call_next, inv.agent, kwargs))
            if routes.mode == "pre_only" or call_next.final:
                finished = True
                inv.close(cancel=False)
                try:
                    async for event in stream:
                        yield event
                except BaseException as exc:
                    inv.passing(exc)
                    raise
                return
            iterator = aiter(stream)
            retry = False
            while True:
                try:
                    event = await inv.pull(iterator)
                except StopAsyncIteration:
                    break
                except DownstreamStopped:
                    # NOTE(hookmesh): the sidecar ended the hook mid-run (its deadline): the
                    # downstream stops here; what it emitted replaces the rest.
                    await close_downstream(iterator)
                    events, message = await inv.wait("done")
                    finished = True
                    for emitted in events:
                        yield emitted
                    return
                except Exception as exc:
                    if exc is inv.broken:
                        raise
                    inv.passing(exc)
                    inv.outcome(error=c.error_to_pb(exc))
                    events, message = await inv.wait("done", "call_next", failed=True)
                    for emitted in events:
                        yield emitted
                    retry = message.WhichOneof("message") == "call_next"
                    if retry:
                        break
                    finished = True
                    raise
                route = routes.route(event.type)
                if route == PASS:
                    yield event
                    continue
                inv.item(route != READ_ONLY, event=event_to_proto(event))
                if route == READ_ONLY:
                    yield event
                    continue
                try:
                    events, message = await inv.wait("verdict")
                except Exception:
                    if inv.link.owner.failure_mode == "fail_open":
                        # NOTE(hookmesh): the middleware is about to be skipped: the event
                        # it held is released unchanged, as if never subscribed to.
                        yield event
                    raise
                for emitted in events:
                    yield emitted
                if message.WhichOneof("message") == "done":
                    finished = True
                    await close_downstream(iterator)
                    return
                verdict = message.verdict
                if not verdict.drop:
                    yield event
                if verdict.final:
                    finished = True
                    inv.close(cancel=False)
                    try:
                        async for event in iterator:
                            yield event
                    except BaseException as exc:
                        inv.passing(exc)
                        raise
                    return
            if retry:
                continue
            inv.outcome(stream_end=_STREAM_END)
            # NOTE(hookmesh): on_reply's downstream ends with reply_end: running it again
            # would start a second reply after the first ended, so only done may answer.
            events, message = await inv.wait(*_AFTER_END.get(hook, ("done", "call_next")))
            for emitted in events:
                yield emitted
        finished = True
    except BaseException as exc:
        inv.own(exc)
        raise
    finally:
        inv.close(cancel=not finished)
