"""Tools a sidecar contributes, over CallTool: the agent's proxy of each, and the sidecar's run
of one call with the run context the request carries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc

from hookmesh.errors import RequestError, SchemaError
from hookmesh.middleware import AgentView, Middleware
from hookmesh.remote import _codec as c
from hookmesh.remote._changes import apply_mutation
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._link import SidecarLink
from hookmesh.remote._sidecar_agent import HostState, SidecarAgent
from hookmesh.remote._sync import Sync
from hookmesh.schema import (
    AgentEvent,
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ToolCall,
    VideoBlock,
    block_from_proto,
    block_to_proto,
    event_to_proto,
    message_from_proto,
    message_to_proto,
)
from hookmesh.tools import AbortReply, Tool, ToolContext, ToolError, ToolPiece, idempotency_key
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2

log = logging.getLogger("hookmesh.remote")

_BLOCKS = (TextBlock, ImageBlock, AudioBlock, VideoBlock, DocumentBlock)
"""The block pieces a tool yields (anything but text and these is an event)."""

# --- the agent's side --------------------------------------------------------------------------


def tool_proxy(link: SidecarLink, spec: _mw_pb2.ToolSpec) -> Tool:
    """A local Tool whose runs stream from the sidecar's CallTool: the request carries the run
    context (reply, session, user, the state slice, the context when asked for); state
    changes are applied and events yielded as they arrive, each within the message deadline."""

    async def call(context: ToolContext[AgentView], **arguments: Any) -> AsyncIterator[ToolPiece]:
        agent = context.agent
        link.admit()
        await link.ready()
        stream = link.stub.CallTool(
            _request(link, spec.name, arguments, context), metadata=link.metadata
        )
        try:
            while True:
                async with asyncio.timeout(link.timeout):
                    piece = await stream.read()
                link.heard()
                if piece is grpc.aio.EOF:
                    return
                arm = piece.WhichOneof("piece")
                if arm == "text":
                    yield piece.text
                elif arm == "media":
                    media: Any = block_from_proto(piece.media, "media")
                    yield media
                elif arm == "event":
                    yield c.event_of_reply(
                        piece.event, agent.reply_id, f"tool {spec.name}", tool=spec.name
                    )
                elif arm == "mutate":
                    apply_mutation(link.owner, agent, piece.mutate)
                elif arm == "error":
                    raise _failed(piece.error)
                elif arm == "end":
                    if piece.end == _content_pb2.TOOL_RESULT_STATE_ERROR:
                        raise ToolError()  # the output streamed so far is the error result
                    return
        except TimeoutError:
            link.missed()
            raise SidecarError(
                f"tool {spec.name}: the sidecar sent nothing for {link.timeout:g} s",
                reason="SIDECAR_DEADLINE_EXCEEDED",
                metadata={"tool": spec.name, "timeoutSeconds": f"{link.timeout:g}"},
            ) from None
        except grpc.aio.AioRpcError as exc:
            # NOTE(hookmesh): the model reads this: gRPC's details name addresses, so only
            # the code goes in (the log has the rest).
            log.info("tool %s on sidecar %s: %s", spec.name, link.target, exc.details())
            down = exc.code() == grpc.StatusCode.UNAVAILABLE
            reason = "SIDECAR_UNAVAILABLE" if down else "SIDECAR_FAILED"
            raise SidecarError(
                f"tool {spec.name}: the sidecar failed ({exc.code().name}, {reason})",
                reason=reason,
                metadata={"tool": spec.name, "grpcCode": exc.code().name},
            ) from None
        finally:
            stream.cancel()

    definition = c.tool_definition(spec)
    return Tool(
        name=spec.name,
        description=spec.description,
        parameters=definition["parameters"],
        func=call,
        read_only=spec.read_only,
        concurrency_safe=spec.concurrency_safe,
        return_directly=spec.return_directly,
        needs_confirmation=spec.needs_confirmation,
        idempotent=spec.idempotent,
    )


def _request(
    link: SidecarLink, name: str, arguments: dict[str, Any], context: ToolContext[AgentView]
) -> _mw_pb2.CallToolRequest:
    owner, agent = link.owner, context.agent
    return _mw_pb2.CallToolRequest(
        name=name,
        arguments=c.arguments_json(arguments),
        call_id=context.call.id,
        reply_id=agent.reply_id,
        idempotency_key=context.idempotency_key,
        agent_name=agent.name,
        session_id=agent.session_id,
        user_id=agent.user_id,
        kind=c.KIND_TO_PB[agent.kind],
        state=c.struct(owner.state(agent)),
        context=[message_to_proto(m) for m in agent.state.context] if owner.needs_context else [],
    )


def _failed(pb: Any) -> AbortReply:
    """The sidecar's middleware failed in its tool: the agent applies this (remote)
    middleware's failure mode, as to an in-process tool's `AbortReply`."""
    return AbortReply(
        RemoteHookError(
            pb.message or "the sidecar's tool failed", reason=pb.reason, metadata=dict(pb.metadata)
        )
    )


# --- the sidecar's side ------------------------------------------------------------------------


async def serve_call(
    mw: Middleware,
    tools: Mapping[str, Tool],
    request: _mw_pb2.CallToolRequest,
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[_mw_pb2.CallToolResponse]:
    """Run one call of `mw`'s tool, streaming its output, its events and (for a request of a
    reply) the state and context changes it made, sent once the run ended."""
    tool = tools.get(request.name)
    if tool is None:
        raise RequestError(
            grpc.StatusCode.NOT_FOUND,
            "TOOL_NOT_FOUND",
            f"this sidecar has no tool {request.name[:64]!r}",
            metadata={"tool": request.name[:64]},
        )
    emitted: list[AgentEvent] = []
    try:
        arguments = tool.parse_arguments(request.arguments)
        agent = _agent(mw, request, emitted.append) if tool.takes_context else None
    except SchemaError:
        raise
    except ValueError as exc:
        raise SchemaError.single("arguments", str(exc), reason="INVALID_ARGUMENTS") from None
    run_context = None
    sync = None
    if agent is not None:
        call = ToolCall(id=request.call_id, name=request.name, arguments=request.arguments)
        key = request.idempotency_key or idempotency_key(request.reply_id, call.id)
        run_context = ToolContext(agent, call, key)
        if request.reply_id:
            sync = Sync(mw.state(agent), agent.state.context, "CallTool", mw.middleware_key())
    ending = _mw_pb2.CallToolResponse(end=_content_pb2.TOOL_RESULT_STATE_SUCCESS)
    try:
        async for piece in tool.run(arguments, run_context):
            if emitted:  # what the run gave `agent.emit`, in place
                for event in emitted:
                    yield _mw_pb2.CallToolResponse(event=event_to_proto(event))
                emitted.clear()
            yield _response(piece)
    except AbortReply as exc:
        ending = _mw_pb2.CallToolResponse(error=c.error_to_pb(exc.error))
    except ToolError as exc:
        for piece in [exc.output] if isinstance(exc.output, str) else exc.output:
            if piece:  # an empty text adds nothing
                yield _response(piece)
        ending = _mw_pb2.CallToolResponse(end=_content_pb2.TOOL_RESULT_STATE_ERROR)
    except Exception as exc:
        yield _mw_pb2.CallToolResponse(text=f"Error: {type(exc).__name__}: {exc}")
        ending = _mw_pb2.CallToolResponse(end=_content_pb2.TOOL_RESULT_STATE_ERROR)
    for event in emitted:
        yield _mw_pb2.CallToolResponse(event=event_to_proto(event))
    mutation = sync.mutation() if sync is not None else None
    if mutation is not None:
        yield _mw_pb2.CallToolResponse(mutate=mutation)
    yield ending


def _response(piece: ToolPiece) -> _mw_pb2.CallToolResponse:
    if isinstance(piece, str):
        return _mw_pb2.CallToolResponse(text=piece)
    if isinstance(piece, _BLOCKS):
        return _mw_pb2.CallToolResponse(media=block_to_proto(piece))
    return _mw_pb2.CallToolResponse(event=event_to_proto(piece))


def _agent(
    mw: Middleware, request: _mw_pb2.CallToolRequest, emit: Callable[[AgentEvent], None]
) -> SidecarAgent:
    """The agent as the request describes it, holding the middleware's slice and the context;
    what the run gives `agent.emit` goes to `emit`."""
    key = mw.middleware_key()
    state = c.from_struct(request.state) if request.state.fields else {}
    messages = [message_from_proto(m, "context") for m in request.context]
    return SidecarAgent(
        request.agent_name,
        c.KIND_FROM_PB.get(request.kind, "flat"),
        request.reply_id,
        request.session_id,
        HostState(messages, {key: {request.reply_id: state}}),
        emit=emit,
        user_id=request.user_id,
    )
