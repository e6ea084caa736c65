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


class Session:
    """One Intercept call to the sidecar under test, read by a background task."""

    def __init__(self, stub: Any, metadata: tuple[tuple[str, str], ...], timeout: float) -> None:
        self.timeout = timeout
        self.call = stub.Intercept(metadata=metadata, timeout=120)
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for response in self.call:
                self.inbox.put_nowait(response)
            self.inbox.put_nowait(None)
        except grpc.aio.AioRpcError as exc:
            self.inbox.put_nowait(exc)

    async def send(self, request: pb.InterceptRequest) -> None:
        await self.call.write(request)

    async def next(self, what: str) -> pb.InterceptResponse:
        """The next message from the sidecar, within the deadline."""
        try:
            async with asyncio.timeout(self.timeout):
                message = await self.inbox.get()
        except TimeoutError:
            raise RuleFailure(f"no message within {self.timeout:g} s; expected {what}") from None
        if message is None:
            raise RuleFailure(f"the sidecar ended the stream; expected {what}")
        if isinstance(message, grpc.aio.AioRpcError):
            raise RuleFailure(f"the stream failed ({message.code().name}); expected {what}")
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
        arm = message.WhichOneof("message") if message is not None else "the end of the stream"
        raise RuleFailure(f"expected silence ({what}), got {arm}")

    async def close(self) -> grpc.StatusCode:
        await self.call.done_writing()
        async with asyncio.timeout(self.timeout):
            await self.reader
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
