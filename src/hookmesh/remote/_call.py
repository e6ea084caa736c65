"""The sidecar's side of one invocation, and the downstream's failures as its hook sees them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from hookmesh.models import ModelError
from hookmesh.remote import _codec as c
from hookmesh.remote._subscriptions import Routes
from hookmesh.remote._sync import Sync
from hookmesh.schema import AgentEvent, ReplyError, event_to_proto
from hookmesh.tools import Tool
from hookmesh.v1 import middleware_pb2 as _mw_pb2


class DownstreamError(Exception):
    """The agent's downstream failed; raised inside the hook, as it would be in process."""

    def __init__(self, error: ReplyError) -> None:
        super().__init__(error.message)
        self.error = error


class DownstreamModelError(ModelError):
    """The model failed downstream: a `ModelError` with its HTTP status, as in process, so a
    middleware's error filter (retry, fallback) treats it the same on both sides."""

    def __init__(self, error: ReplyError) -> None:
        status = error.metadata.get("httpStatus", "")
        metadata = {k: v for k, v in error.metadata.items() if k != "httpStatus"}
        super().__init__(
            error.message, status=int(status) if status.isdigit() else 0, metadata=metadata
        )
        self.error = error


def downstream_error(error: ReplyError) -> Exception:
    """The downstream's failure as the hook sees it (a model error stays a `ModelError`)."""
    if error.reason == ModelError.reason:
        return DownstreamModelError(error)
    return DownstreamError(error)


class HostCall:
    """The sidecar's side of one invocation: its inbox, what it sends, and what the agent
    last saw of its state and context (so only changes go)."""

    def __init__(
        self,
        out: asyncio.Queue[_mw_pb2.InterceptResponse | None],
        routes: Mapping[str, Routes],
        tools: Mapping[str, Tool],
        invocation_id: str,
        muted: bool,
    ) -> None:
        self.out = out
        self.routes = routes
        self.tools = tools
        self.id = invocation_id
        self.inbox: asyncio.Queue[_mw_pb2.InterceptRequest] = asyncio.Queue()
        self.muted = muted
        self.sync: Sync | None = None

    def send(self, **message: Any) -> None:
        if not self.muted:
            self.out.put_nowait(_mw_pb2.InterceptResponse(invocation_id=self.id, **message))

    def emit(self, event: AgentEvent) -> None:
        self.send(emit=event_to_proto(event))

    def control(self, **message: Any) -> None:
        """Send a control message, preceded by any state or context change."""
        assert self.sync is not None
        mutation = self.sync.mutation()
        if mutation is not None:
            self.send(mutate=mutation)
        self.send(**message)

    async def receive(self) -> _mw_pb2.InterceptRequest:
        request = await self.inbox.get()
        if request.WhichOneof("message") == "cancel":
            raise asyncio.CancelledError
        return request

    def take_outcome(self, outcome: _mw_pb2.DownstreamOutcome) -> str:
        assert self.sync is not None
        self.sync.take(outcome.state, outcome.context)
        arm = outcome.WhichOneof("result")
        if arm == "error":
            raise downstream_error(c.reply_error_from_pb(outcome.error))
        return arm or ""
