"""A sidecar that answers each Intercept message from a script: protocol-level tests of the
agent's side, including sidecars that misbehave."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from hookmesh.remote import SERVICE_NAME
from hookmesh.server import RunningServer, Service, start_server
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc


class BreakStream(Exception):
    """Raised by a script: the sidecar ends the stream with UNAVAILABLE, as if it died."""


Answer = Callable[[pb.InterceptRequest], list[pb.InterceptResponse] | None]
"""Given one request, the responses to send (None or [] for none); may raise BreakStream."""


def response(invocation_id: str, **message: Any) -> pb.InterceptResponse:
    return pb.InterceptResponse(invocation_id=invocation_id, **message)


def describe(
    hook: int,
    *,
    subscriptions: tuple[str, ...] = (),
    read_only: tuple[str, ...] = (),
    mode: int = pb.HOOK_MODE_INTERCEPT,
    needs_context: bool = False,
    key: str = "scripted",
) -> pb.DescribeResponse:
    return pb.DescribeResponse(
        protocol_version=1,
        middleware_key=key,
        hooks=[
            pb.HookSpec(
                hook=hook,
                mode=mode,
                subscriptions=subscriptions,
                read_only_subscriptions=read_only,
            )
        ],
        needs_context=needs_context,
    )


def pass_through(request: pb.InterceptRequest) -> list[pb.InterceptResponse]:
    """call_next to an invocation, keep every item, done to an outcome (nothing to a start)."""
    arm = request.WhichOneof("message")
    rid = request.invocation_id
    if arm == "invocation":
        return [response(rid, call_next=pb.CallNext())]
    if arm == "item" and request.item.HasField("event"):
        return [response(rid, verdict=pb.ItemVerdict())]
    if arm == "outcome" and request.outcome.WhichOneof("result") != "stream_start":
        return [response(rid, done=pb.HookDone())]
    return []


class ScriptedSidecar(pb_grpc.MiddlewareServiceServicer):
    """Describes itself as told and answers each Intercept request with `answer`."""

    def __init__(self, description: pb.DescribeResponse, answer: Answer = pass_through) -> None:
        self.description = description
        self.answer = answer
        self.requests: list[pb.InterceptRequest] = []

    async def Describe(self, request: Any, context: Any) -> pb.DescribeResponse:
        return self.description

    async def Intercept(
        self, request_iterator: AsyncIterator[pb.InterceptRequest], context: Any
    ) -> AsyncIterator[pb.InterceptResponse]:
        async for request in request_iterator:
            self.requests.append(request)
            try:
                answers = self.answer(request) or []
            except BreakStream:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "the scripted sidecar died")
            for answer in answers:
                yield answer


async def serve_scripted(sidecar: ScriptedSidecar) -> RunningServer:
    return await start_server(
        [Service(SERVICE_NAME, sidecar, pb_grpc.add_MiddlewareServiceServicer_to_server)]
    )
