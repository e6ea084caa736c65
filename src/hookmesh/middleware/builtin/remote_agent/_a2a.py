"""One remote A2A agent: its configuration, its card, an a2a-sdk client, and one task step run
to its end as hookmesh events and a result."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import a2a_pb2
from google.protobuf import json_format
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from hookmesh.a2a import (
    DATA_MIME,
    EVENT_METADATA_KEY,
    SPENT_METADATA_KEY,
    Spent,
    blocks_from_parts,
    spent_of,
    text_of_parts,
)
from hookmesh.schema import AgentEvent, CustomEvent, TextBlock, ToolOutputBlock

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_EVENT = TypeAdapter(AgentEvent)
_S = a2a_pb2.TaskState
_ENDS = {
    _S.TASK_STATE_COMPLETED: "completed",
    _S.TASK_STATE_FAILED: "failed",
    _S.TASK_STATE_CANCELED: "canceled",
    _S.TASK_STATE_REJECTED: "rejected",
    _S.TASK_STATE_INPUT_REQUIRED: "input_required",
    _S.TASK_STATE_AUTH_REQUIRED: "auth_required",
}
STATUS_EVENT = "a2a.status"
"""Custom event of a remote agent's status message that carries no hookmesh event."""


class RemoteAgentConfig(BaseModel):
    """One remote A2A agent."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The tool's name (1-48 characters of ``A-Z a-z 0-9 _ -``)."""
    url: str
    """The agent's base URL; its card is at ``/.well-known/agent-card.json`` below it."""
    token_env: str | None = None
    """Environment variable holding a bearer token sent with every request (a secret)."""
    binding: Literal["JSONRPC", "HTTP+JSON", "GRPC"] | None = None
    """Preferred binding; by default the first the card offers that the SDK supports."""
    description: str = ""
    """The tool's description; by default the card's description and skills."""
    timeout: float = Field(600.0, gt=0)
    """Seconds one task step may take."""

    @model_validator(mode="after")
    def _valid_name(self) -> RemoteAgentConfig:
        if not _NAME.fullmatch(self.name):
            raise ValueError("name: use 1-48 characters of A-Z a-z 0-9 _ -")
        return self


@dataclass
class TaskOutcome:
    """How a task step ended."""

    state: str = ""
    """``completed``, ``failed``, ``canceled``, ``rejected``, ``input_required`` or
    ``auth_required``; empty when the stream ended without saying."""
    task_id: str = ""
    """The remote task."""
    context_id: str = ""
    """The remote context (its session)."""
    output: list[ToolOutputBlock] = field(default_factory=list)
    """The artifacts' content (completed), or the status message's (otherwise)."""
    status_data: list[Any] = field(default_factory=list)
    """The status message's data parts (what an input-required task waits for)."""
    spent: Spent | None = None
    """What the remote agent reported it spent (the limits extension), if it did."""


class _TokenMetadata(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds the bearer token to every gRPC call."""

    def __init__(self, token: str) -> None:
        self._metadata = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), self._metadata]
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


def _output(parts: Any) -> list[ToolOutputBlock]:
    """Parts as tool output; data parts become their JSON text (what a model can read)."""
    out: list[ToolOutputBlock] = []
    for block in blocks_from_parts(parts):
        if block.type == "document" and block.source.mime_type == DATA_MIME:
            out.append(TextBlock(text=block.source.data.decode()))  # type: ignore[union-attr]
        elif block.type in ("text", "image", "audio", "video", "document"):
            out.append(block)  # type: ignore[arg-type]
    return out


class RemoteAgent:
    """A remote agent's card and client, opened by `open` and closed by `close`.

    Args:
        config: The agent.
    """

    def __init__(self, config: RemoteAgentConfig) -> None:
        self.config = config
        self.card: a2a_pb2.AgentCard | None = None
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None

    async def open(self) -> None:
        """Read the card and make a client for the chosen binding.

        Raises:
            httpx.HTTPError, ValueError: The card cannot be read or used.
        """
        c = self.config
        token = os.environ.get(c.token_env) if c.token_env else None
        if c.token_env and not token:
            raise ValueError(f"environment variable {c.token_env} is unset")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(c.timeout))
        self.card = await A2ACardResolver(self._http, c.url).get_agent_card()
        interceptors = [_TokenMetadata(token)] if token else []
        settings = ClientConfig(
            httpx_client=self._http,
            grpc_channel_factory=lambda url: grpc.aio.insecure_channel(
                url, interceptors=interceptors
            ),
            supported_protocol_bindings=[c.binding] if c.binding else ["JSONRPC", "HTTP+JSON"],
        )
        self._client = await create_client(self.card, client_config=settings)

    async def close(self) -> None:
        """Close the client and its connections."""
        if self._client is not None:
            await self._client.close()
        if self._http is not None:
            await self._http.aclose()

    def description(self) -> str:
        """The tool's description: configured, or the card's with its skills."""
        if self.config.description or self.card is None:
            return self.config.description or f"Ask the remote agent {self.config.name}."
        skills = "; ".join(
            f"{s.name}: {s.description}" if s.description else s.name for s in self.card.skills
        )
        text = f"Ask the remote agent {self.card.name}: {self.card.description}"
        return f"{text} Skills: {skills}" if skills else text

    async def run(
        self,
        parts: list[a2a_pb2.Part],
        outcome: TaskOutcome,
        *,
        context_id: str = "",
        task_id: str = "",
        message_id: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Send one message (continuing `task_id` when set, with `metadata`) and follow the
        task to its end or pause, yielding the remote reply's events (its own, un-nested) as
        they come; fills `outcome`.

        Raises:
            TimeoutError: The step took longer than the timeout.
            A2AClientError, httpx.HTTPError, grpc.RpcError: The call failed.
        """
        assert self._client is not None
        message = a2a_pb2.Message(
            role=a2a_pb2.Role.ROLE_USER,
            message_id=message_id or os.urandom(16).hex(),
            parts=parts,
            context_id=context_id,
            task_id=task_id,
        )
        if metadata:
            message.metadata.update(metadata)
        artifacts: dict[str, list[a2a_pb2.Part]] = {}
        stream = self._client.send_message(a2a_pb2.SendMessageRequest(message=message))
        try:
            async with asyncio.timeout(self.config.timeout):
                async for response in stream:
                    event = self._take(response, outcome, artifacts)
                    if event is not None:
                        yield event
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if outcome.state == "completed":
            outcome.output = _output(p for parts in artifacts.values() for p in parts)

    def _take(
        self,
        response: a2a_pb2.StreamResponse,
        outcome: TaskOutcome,
        artifacts: dict[str, list[a2a_pb2.Part]],
    ) -> AgentEvent | None:
        arm = response.WhichOneof("payload")
        if arm == "message":
            outcome.state = "completed"
            artifacts["message"] = list(response.message.parts)
            return None
        if arm == "task":
            outcome.task_id, outcome.context_id = response.task.id, response.task.context_id
            for artifact in response.task.artifacts:
                artifacts[artifact.artifact_id] = list(artifact.parts)
            # A final task carries the report in its metadata; an unfinished one's metadata
            # holds the last status update's (merged by the server), not a new event.
            task = response.task
            final = task.status.state in _ENDS
            return self._status(task.status, task.metadata if final else None, outcome)
        if arm == "artifact_update":
            update = response.artifact_update
            kept = artifacts.setdefault(update.artifact.artifact_id, []) if update.append else []
            kept.extend(update.artifact.parts)
            artifacts[update.artifact.artifact_id] = kept
            return None
        if arm == "status_update":
            update = response.status_update
            return self._status(update.status, update.metadata, outcome)
        return None

    def _status(
        self, status: a2a_pb2.TaskStatus, metadata: Any, outcome: TaskOutcome
    ) -> AgentEvent | None:
        ended = _ENDS.get(status.state)
        if ended is not None:
            outcome.state = ended
            if metadata is not None:
                outcome.spent = spent_of(
                    json_format.MessageToDict(metadata).get(SPENT_METADATA_KEY)
                )
            parts = list(status.message.parts)
            outcome.output = _output(p for p in parts if p.WhichOneof("content") != "data")
            outcome.status_data = [
                json_format.MessageToDict(p.data)
                for p in parts
                if p.WhichOneof("content") == "data"
            ]
            return None
        carried = json_format.MessageToDict(metadata).get(EVENT_METADATA_KEY) if metadata else None
        if carried is not None:
            try:
                return _EVENT.validate_json(json.dumps(carried))
            except ValidationError:
                pass
        text = text_of_parts(status.message.parts) if status.HasField("message") else ""
        if not text:
            return None
        state = a2a_pb2.TaskState.Name(status.state)
        return CustomEvent(
            reply_id=outcome.task_id, name=STATUS_EVENT, value={"state": state, "text": text}
        )


def context_for(session_id: str, name: str) -> str:
    """The remote context of this session's calls to agent `name` (so they share the remote
    conversation); empty (a new context per call) without a session."""
    if not session_id:
        return ""
    return hashlib.sha256(f"{session_id}\0{name}".encode()).hexdigest()[:32]
