"""Tools a sidecar contributes, called over CallTool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from hookmesh.remote import _codec as c
from hookmesh.remote._errors import RemoteHookError, SidecarError
from hookmesh.remote._link import SidecarLink
from hookmesh.schema import block_from_proto
from hookmesh.tools import Tool
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2


def tool_proxy(mw: SidecarLink, spec: _mw_pb2.ToolSpec) -> Tool:
    """A local Tool whose runs stream from the sidecar's CallTool (one deadline per call)."""

    async def call(**arguments: Any) -> AsyncIterator[Any]:
        request = _mw_pb2.CallToolRequest(name=spec.name, arguments=c.arguments_json(arguments))
        try:
            async for piece in mw.stub.CallTool(request, timeout=mw.timeout, metadata=mw.metadata):
                arm = piece.WhichOneof("piece")
                if arm == "text":
                    yield piece.text
                elif arm == "media":
                    yield block_from_proto(piece.media, "media")
                elif arm == "end" and piece.end == _content_pb2.TOOL_RESULT_STATE_ERROR:
                    raise RemoteHookError(f"tool {spec.name} failed in the sidecar")
        except grpc.aio.AioRpcError as exc:
            raise SidecarError(
                f"tool {spec.name}: {exc.code().name}: {exc.details()}",
                reason="SIDECAR_UNAVAILABLE"
                if exc.code() == grpc.StatusCode.UNAVAILABLE
                else "SIDECAR_FAILED",
                metadata={"tool": spec.name, "grpcCode": exc.code().name},
            ) from None

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
