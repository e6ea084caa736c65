"""The runner's side of one Intercept stream: send, expect an answer, prove silence."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from google.protobuf import duration_pb2, struct_pb2

from hookmesh.schema import MessageKind, make_text, make_user_text, message_to_proto
from hookmesh.v1 import middleware_pb2 as pb

KIND_PB = {"flat": pb.MESSAGE_KIND_FLAT, "agentic": pb.MESSAGE_KIND_AGENTIC}


class RuleFailure(AssertionError):
    """A sidecar broke a conformance rule; the message says how."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise RuleFailure(message)


def invocation(
    invocation_id: str,
    hook: int,
    kind: MessageKind,
    marker: str = "",
    *,
    state: dict[str, Any] | None = None,
    timeout: float = 5.0,
    **kwargs: Any,
) -> pb.InterceptRequest:
    """An invocation whose last context message carries `marker` (none when empty)."""
    context = [make_user_text(kind, "first message", id="m1")]
    if marker:
        context.append(make_user_text(kind, f"conformance:{marker}", id="m2"))
    request = pb.InterceptRequest(invocation_id=invocation_id)
    inv = request.invocation
    inv.hook = hook  # type: ignore[assignment]
    inv.reply_id = "conformance-reply"
    inv.agent_name = "conformance"
    inv.kind = KIND_PB[kind]  # type: ignore[assignment]
    inv.context.extend(message_to_proto(m) for m in context)
    inv.message_timeout.CopyFrom(
        duration_pb2.Duration(nanos=int(timeout % 1 * 1e9), seconds=int(timeout))
    )
    if state:
        inv.state.update(state)
    for arm, args in kwargs.items():
        getattr(inv, arm).CopyFrom(args)
    return request


def assistant(kind: MessageKind, text: str) -> Any:
    return message_to_proto(make_text(kind, "assistant", text))


def struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _arm_of(message: Any) -> str:
    """What arrived: a message's arm, the end of the stream or its failure."""
    if message is None:
        return "the end of the stream"
    if isinstance(message, grpc.aio.AioRpcError):
        return f"a stream failure ({message.code().name})"
    return message.WhichOneof("message") or "an empty message"  # type: ignore[no-any-return]


class Session:
    """One Intercept call to the sidecar under test, read by a background task.

    It keeps the reply id of each invocation it started (an emit for another reply breaks
    the protocol; a message for an invocation it never started too) and the invocations the
    sidecar ended (nothing may follow their `done`, or a `final` call_next or verdict).
    """

    def __init__(self, stub: Any, metadata: tuple[tuple[str, str], ...], timeout: float) -> None:
        self.timeout = timeout
        self.call = stub.Intercept(metadata=metadata, timeout=120)
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())
        self.last: pb.InterceptResponse | None = None
        """The last message the sidecar sent."""
        self.replies: dict[str, str] = {}
        self.ended: dict[str, str] = {}
        """Invocation id → what the sidecar ended it with."""

    async def _read(self) -> None:
        try:
            async for response in self.call:
                self.inbox.put_nowait(response)
            self.inbox.put_nowait(None)
        except grpc.aio.AioRpcError as exc:
            self.inbox.put_nowait(exc)

    async def send(self, request: pb.InterceptRequest) -> None:
        if request.WhichOneof("message") == "invocation":
            self.replies[request.invocation_id] = request.invocation.reply_id
            self.ended.pop(request.invocation_id, None)
        try:
            await self.call.write(request)
        except grpc.aio.AioRpcError as exc:
            raise RuleFailure(f"the stream failed ({exc.code().name}) while sending") from None
        except asyncio.InvalidStateError:
            raise RuleFailure("the sidecar ended the stream before the agent was done") from None

    def _screen(self, message: pb.InterceptResponse) -> None:
        """Rules every message obeys, whatever the rule under test expects."""
        self.last = message
        iid = message.invocation_id
        arm = message.WhichOneof("message")
        check(
            iid in self.replies,
            f"sent {arm} for invocation {iid!r}, which the agent never started on this stream "
            "(stream.only_started_invocations: answer only invocations the agent sent)",
        )
        check(
            iid not in self.ended,
            f"sent {arm} for invocation {iid!r} after its {self.ended.get(iid)} "
            "(stream.nothing_after_done: one done, or a final call_next or verdict, ends an "
            "invocation)",
        )
        if arm == "done":
            self.ended[iid] = "done"
        elif arm == "call_next" and message.call_next.final:
            self.ended[iid] = "final call_next"
        elif arm == "verdict" and message.verdict.final:
            self.ended[iid] = "final verdict"
        if arm == "emit" and message.emit.reply_id:
            expected = self.replies.get(iid, "")
            check(
                message.emit.reply_id == expected,
                f"emit for reply {message.emit.reply_id!r} on an invocation of {expected!r} "
                "(leave reply_id empty or set the invocation's)",
            )

    async def next(self, what: str) -> pb.InterceptResponse:
        """The next message from the sidecar, within the deadline."""
        try:
            async with asyncio.timeout(self.timeout):
                message = await self.inbox.get()
        except TimeoutError:
            raise RuleFailure(f"no message within {self.timeout:g} s; expected {what}") from None
        if message is None or isinstance(message, grpc.aio.AioRpcError):
            raise RuleFailure(f"got {_arm_of(message)}; expected {what}")
        self._screen(message)
        return message  # type: ignore[no-any-return]

    async def expect(self, invocation_id: str, *arms: str) -> list[pb.InterceptResponse]:
        """Messages for `invocation_id` until one of `arms` (emits and mutates collected)."""
        seen: list[pb.InterceptResponse] = []
        while True:
            message = await self.next(" or ".join(arms))
            arm = message.WhichOneof("message")
            check(
                message.invocation_id == invocation_id,
                f"got {arm} for invocation {message.invocation_id!r}, expected {invocation_id!r}",
            )
            seen.append(message)
            if arm in arms:
                return seen
            check(
                arm in ("emit", "mutate"),
                f"got {arm or 'an empty message'}, expected {' or '.join(arms)}",
            )

    async def silence(self, seconds: float, what: str) -> None:
        """Nothing may arrive for `seconds`."""
        try:
            async with asyncio.timeout(seconds):
                message = await self.inbox.get()
        except TimeoutError:
            return
        if message is not None and not isinstance(message, grpc.aio.AioRpcError):
            self._screen(message)
            what = f"{what}; for invocation {message.invocation_id!r}"
        raise RuleFailure(f"expected silence ({what}), got {_arm_of(message)}")

    async def close(self) -> grpc.StatusCode:
        """Half-close the agent's side; the sidecar must end the stream (with its status)."""
        await self.call.done_writing()
        try:
            async with asyncio.timeout(self.timeout):
                await self.reader
        except TimeoutError:
            raise RuleFailure(
                f"the sidecar did not end the stream within {self.timeout:g} s of the agent "
                "closing its side"
            ) from None
        while not self.inbox.empty():
            message = self.inbox.get_nowait()
            if message is not None and not isinstance(message, grpc.aio.AioRpcError):
                self._screen(message)
        return await self.call.code()  # type: ignore[no-any-return]

    def cancel(self) -> None:
        self.call.cancel()
        self.reader.cancel()


def customs(messages: list[pb.InterceptResponse]) -> list[str]:
    """Names of the custom events emitted among `messages`."""
    return [m.emit.custom.name for m in messages if m.WhichOneof("message") == "emit"]


def last_state(messages: list[pb.InterceptResponse]) -> dict[str, Any] | None:
    """The state of the last mutate among `messages` that sets one."""
    found = None
    for m in messages:
        if m.WhichOneof("message") == "mutate" and m.mutate.HasField("state"):
            found = dict(m.mutate.state)
    return found
