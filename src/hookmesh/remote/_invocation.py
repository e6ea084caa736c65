"""The agent's side of one hook invocation: its inbox on the shared stream, the waits with
their deadlines, what it sends, and who is to blame when it fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry import propagate, trace

from hookmesh.middleware import AgentView, blame
from hookmesh.remote import _codec as c
from hookmesh.remote._changes import apply_mutation
from hookmesh.remote._errors import RemoteHookError, SidecarError, protocol_error
from hookmesh.remote._link import SidecarLink
from hookmesh.remote._mailbox import Mailbox
from hookmesh.remote._stream import InterceptStream
from hookmesh.schema import AgentEvent, message_to_proto
from hookmesh.v1 import middleware_pb2 as _mw_pb2


class DownstreamStopped(Exception):
    """The sidecar ended the hook while the downstream ran (a `done` nobody asked for, e.g.
    its deadline passed): the downstream is dropped and that `done` is the hook's answer."""


async def close_downstream(iterator: AsyncIterator[Any]) -> None:
    """Stop a downstream stream early (the tool run or model request behind it is cancelled)."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class _Invocation:
    """The agent's side of one hook invocation."""

    __slots__ = (
        "agent",
        "broken",
        "done_sent",
        "hook",
        "id",
        "inbox",
        "interrupted",
        "link",
        "passed",
        "pulling",
        "stream",
        "task",
    )

    def __init__(
        self, link: SidecarLink, stream: InterceptStream, agent: AgentView, hook: str
    ) -> None:
        self.link = link
        self.stream = stream
        self.agent = agent
        self.hook = hook
        self.id = stream.next_id()
        self.inbox = Mailbox(link.timeout)
        self.broken: SidecarError | None = None
        self.done_sent = False
        self.pulling = False
        self.interrupted = False
        self.passed: BaseException | None = None
        """The downstream's error on its way up through this invocation (not ours)."""
        self.task = asyncio.current_task()
        stream.invocations[self.id] = self

    def own(self, exc: BaseException) -> None:
        """Blame `exc` on this middleware unless it is the downstream's, passing through."""
        if exc is not self.passed:
            blame(exc, self.link.owner)

    def passing(self, exc: BaseException) -> None:
        """Note that `exc` came from downstream (so `own` leaves it to its owner)."""
        self.passed = exc

    def ended(self) -> None:
        """A `done` arrived. Answering a wait, `wait` takes it; sent unasked while the
        downstream runs, it stops the downstream wait (`pull` and `downstream` raise
        `DownstreamStopped`, now or at their next call)."""
        self.done_sent = True
        if self.pulling:
            self._cancel_wait("hookmesh: the sidecar ended the hook")

    def _cancel_wait(self, why: str) -> None:
        """Cancel the downstream wait once (`_woken` undoes the one cancellation)."""
        if self.task is not None and not self.interrupted:
            self.interrupted = True
            self.task.cancel(why)

    def fail(self, error: SidecarError) -> None:
        """The stream broke: wake any wait, and interrupt a fail_closed downstream wait."""
        self.broken = error
        self.link.failed(error)
        self.inbox.put_nowait(error)
        if self.pulling and self.link.owner.failure_mode == "fail_closed":
            self._cancel_wait("hookmesh: the sidecar failed")

    async def pull(self, iterator: AsyncIterator[Any]) -> Any:
        """The downstream's next item. Under fail_closed a broken sidecar stream ends the
        wait at once (the reply need not run to its end to learn it failed); a `done` the
        sidecar sends meanwhile ends it with `DownstreamStopped`."""
        self._check_waiting()
        self.pulling = True
        try:
            return await anext(iterator)
        except asyncio.CancelledError:
            if (woken := self._woken()) is None:
                raise
            raise woken from None
        finally:
            self.pulling = False

    async def downstream(self, start: Callable[[], Awaitable[Any]]) -> Any:
        """`pull` for a downstream that is one awaitable (a model call), started here once
        the checks passed."""
        self._check_waiting()
        self.pulling = True
        try:
            return await start()
        except asyncio.CancelledError:
            if (woken := self._woken()) is None:
                raise
            raise woken from None
        finally:
            self.pulling = False

    def _check_waiting(self) -> None:
        """Before the downstream runs on: a broken stream (fail_closed), or a `done` the
        sidecar sent while the agent was busy upstream. (Emits may come unasked too: they
        wait in the inbox for the next answer.)"""
        if self.broken is not None and self.link.owner.failure_mode == "fail_closed":
            raise self.broken
        if self.done_sent:
            raise DownstreamStopped

    def _woken(self) -> Exception | None:
        """Why this invocation cancelled the downstream wait: the stream broke, or the
        sidecar ended the hook. None when the cancellation is someone else's (the reply's
        interrupt, an outer deadline), also when it came beside this one: it goes on."""
        if not self.interrupted:
            return None
        self.interrupted = False
        if self.task is not None and self.task.uncancel() > 0:
            return None
        return self.broken if self.broken is not None else DownstreamStopped()

    def send(self, **message: Any) -> None:
        self.queue(_mw_pb2.InterceptRequest(invocation_id=self.id, **message))

    def queue(self, request: _mw_pb2.InterceptRequest, read_only: bool = False) -> None:
        """Queue `request` for the shared stream, unless the sidecar could not take it: a
        message over its limit would break the stream for every reply, so only this
        invocation fails."""
        size = request.ByteSize()
        limit = self.link.max_message_bytes
        if size > limit:
            raise SidecarError(
                f"an invocation message of {size} bytes exceeds the sidecar's limit of {limit}",
                reason="INVOCATION_TOO_LARGE",
                metadata={"bytes": str(size), "limit": str(limit)},
            )
        self.stream.send(request, size if read_only else 0)

    def fill_state(self, message: Any) -> None:
        """Set `message.state` to the middleware's slice, when it has one."""
        by_reply = self.agent.state.middle_context.get(self.link.owner.middleware_key())
        slice_ = by_reply.get(self.agent.reply_id) if by_reply else None
        if slice_:
            message.state.update(slice_)

    def context(self) -> list[Any]:
        if not self.link.owner.needs_context:
            return []
        return [message_to_proto(m) for m in self.agent.state.context]

    def item(self, state: bool, **item: Any) -> None:
        """Send a downstream item, with the state slice as it is now when `state` (an item
        awaiting a verdict); one without may be coalesced with the next."""
        request = _mw_pb2.InterceptRequest(invocation_id=self.id)
        pb = request.item
        if state:
            self.fill_state(pb)
        for arm, value in item.items():
            getattr(pb, arm).CopyFrom(value)
        self.queue(request, read_only=not state and "event" in item)

    def outcome(self, **result: Any) -> None:
        request = _mw_pb2.InterceptRequest(invocation_id=self.id)
        outcome = request.outcome
        self.fill_state(outcome)
        if self.link.owner.needs_context:
            outcome.context.extend(self.context())
        for arm, value in result.items():
            getattr(outcome, arm).MergeFrom(value)
        self.queue(request)

    async def wait(self, *expected: str, failed: bool = False) -> tuple[list[AgentEvent], Any]:
        """Apply mutations and collect emits until one of `expected` arrives (or done).

        `failed`: the downstream failed, so a done carrying that error is no hook failure
        (the agent re-raises the downstream's own exception).
        """
        events: list[AgentEvent] = []
        timeout = self.link.timeout
        while True:
            try:
                message = await self.inbox.get()
            except TimeoutError:
                self.link.missed()
                raise SidecarError(
                    f"the sidecar sent nothing for {timeout:g} s in {self.hook}",
                    reason="SIDECAR_DEADLINE_EXCEEDED",
                    metadata={"hook": self.hook, "timeoutSeconds": f"{timeout:g}"},
                ) from None
            if isinstance(message, SidecarError):
                raise message
            self.link.heard()
            arm = message.WhichOneof("message")
            if arm == "emit":
                events.append(
                    c.event_of_reply(message.emit, self.agent.reply_id, self.hook, hook=self.hook)
                )
            elif arm == "mutate":
                apply_mutation(self.link.owner, self.agent, message.mutate)
            elif arm == "done" and message.done.WhichOneof("result") == "error" and not failed:
                error = message.done.error
                hook_error = RemoteHookError(
                    error.message or "the sidecar's hook failed",
                    reason=error.reason,
                    metadata=dict(error.metadata),
                )
                self.link.failed(hook_error)
                raise hook_error
            elif arm in expected or arm == "done":
                return events, message
            else:
                raise protocol_error(
                    f"sidecar sent {arm or 'an empty message'} where "
                    f"{' or '.join(expected)} was due in {self.hook}",
                    hook=self.hook,
                    sent=arm or "",
                )

    def close(self, cancel: bool) -> None:
        self.inbox.close()
        if cancel and self.stream.alive:
            self.send(cancel=_mw_pb2.CancelInvocation())
        self.stream.invocations.pop(self.id, None)
        if self.stream.retired and not self.stream.invocations:
            self.stream.half_close()


def invoke(link: SidecarLink, agent: AgentView, hook: str, **kwargs_arm: Any) -> _Invocation:
    """Start one invocation of `hook` on the shared stream: the hook, the reply, the state
    slice, the context when asked for, and the kwargs arm, built in place (no copies).

    Raises:
        SidecarError: SIDECAR_CIRCUIT_OPEN or INVOCATION_TOO_LARGE; nothing was sent.
    """
    try:
        link.admit()
    except SidecarError as exc:
        blame(exc, link.owner)
        raise
    stream = link.stream()
    inv = _Invocation(link, stream, agent, hook)
    request = _mw_pb2.InterceptRequest(invocation_id=inv.id)
    invocation = request.invocation
    invocation.hook = c.HOOK_TO_PB[hook]
    invocation.reply_id = agent.reply_id
    invocation.agent_name = agent.name
    invocation.session_id = agent.session_id
    invocation.user_id = agent.user_id
    invocation.kind = c.KIND_TO_PB[agent.kind]
    invocation.message_timeout.CopyFrom(link.timeout_pb)
    inv.fill_state(invocation)
    if link.owner.needs_context:
        invocation.context.extend(inv.context())
    for arm, args in kwargs_arm.items():
        getattr(invocation, arm).MergeFrom(args)
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(invocation.trace_context)
    try:
        inv.queue(request)
    except SidecarError as exc:
        del stream.invocations[inv.id]
        blame(exc, link.owner)
        raise
    return inv
