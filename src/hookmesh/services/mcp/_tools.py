"""The suite's capabilities as MCP tools and a resource: knowledge search, memories, speech."""

from __future__ import annotations

import base64
import os
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, EmbeddedResource, ToolAnnotations
from pydantic import Field

from hookmesh.client import AgentClientError
from hookmesh.memory import MemoryScope
from hookmesh.services.mcp._callers import ClientPool, current_caller
from hookmesh.services.mcp._config import McpServerSettings
from hookmesh.tts import PcmFormat, wav_header

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


def _refused(exc: AgentClientError) -> ToolError:
    """A service refusal as the tool's error (its stable reason first)."""
    return ToolError(f"{exc.reason or exc.code.name}: {exc.message}")


async def _speech(pool: ClientPool, settings: McpServerSettings, text: str, voice: str) -> bytes:
    if not text.strip():
        raise ToolError("give some text to speak")
    if len(text) > settings.max_speech_chars:
        raise ToolError(f"the text is over {settings.max_speech_chars} characters")
    clients = await pool.for_caller(current_caller(settings))
    assert clients.tts is not None
    pcm, shape = bytearray(), None
    try:
        async for chunk in clients.tts.synthesize(text, voice=voice):
            pcm.extend(chunk.data)
            shape = PcmFormat(chunk.sample_rate, chunk.channels)
    except AgentClientError as exc:
        raise _refused(exc) from None
    if shape is None:
        raise ToolError("the speech service sent no audio")
    return wav_header(shape, len(pcm)) + bytes(pcm)


def register_tools(server: MCPServer, settings: McpServerSettings, pool: ClientPool) -> None:
    """Add the tools of every configured service to `server`."""
    if settings.retrieval:
        offered = list(settings.knowledge_bases)

        @server.tool(annotations=_READ)
        async def search_knowledge(
            query: str,
            knowledge_bases: list[str] | None = None,
            top_k: Annotated[int, Field(ge=1, le=50)] = 5,
        ) -> str:
            """Search the knowledge bases (hybrid: meaning and keywords) and return the best
            passages, each with its source.

            Args:
                query: The question or keywords.
                knowledge_bases: Bases to search; all that are offered when empty.
                top_k: How many passages at most.
            """
            asked = list(knowledge_bases or [])
            outside = [kb for kb in asked if offered and kb not in offered]
            if outside:
                raise ToolError(f"not offered here: {', '.join(outside)}; offered: {offered}")
            clients = await pool.for_caller(current_caller(settings))
            assert clients.retrieval is not None
            try:
                hits = await clients.retrieval.search(query, asked or offered, top_k=top_k)
            except AgentClientError as exc:
                raise _refused(exc) from None
            if not hits:
                return f"No passage matches {query!r}."
            return "\n\n".join(
                f"[{h.rank}] {h.knowledge_base}/{h.document_id} (score {h.score:.3f})\n{h.text}"
                for h in hits
            )

    if settings.memory:

        @server.tool(annotations=_READ)
        async def recall(query: str, top_k: Annotated[int, Field(ge=1, le=50)] = 5) -> str:
            """Search what you remember about the user (their long-term memories).

            Args:
                query: What to look for.
                top_k: How many memories at most.
            """
            caller = current_caller(settings)
            clients = await pool.for_caller(caller)
            assert clients.memory is not None
            try:
                hits = await clients.memory.search(query, MemoryScope(caller.user), top_k=top_k)
            except AgentClientError as exc:
                raise _refused(exc) from None
            if not hits:
                return "Nothing remembered matches."
            return "\n".join(f"- {h.memory.text}" for h in hits)

        @server.tool(annotations=_ADD)
        async def remember(fact: str) -> str:
            """Remember a fact about the user for later conversations.

            Args:
                fact: One self-contained fact, e.g. "The user prefers green tea."
            """
            caller = current_caller(settings)
            clients = await pool.for_caller(caller)
            assert clients.memory is not None
            try:
                added = await clients.memory.add(MemoryScope(caller.user), facts=[fact])
            except AgentClientError as exc:
                raise _refused(exc) from None
            outcomes = ", ".join(m.outcome for m in added.memories) or "nothing stored"
            return f"Remembered ({outcomes})."

    if settings.tts:

        @server.tool(annotations=_READ)
        async def speak(text: str, voice: str = "") -> EmbeddedResource:
            """Say a text aloud: returns the speech as a WAV audio resource.

            Args:
                text: What to say.
                voice: A voice name; the service's default when empty.
            """
            wav = await _speech(pool, settings, text, voice)
            return EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri=f"speech://{os.urandom(8).hex()}.wav",
                    mime_type="audio/wav",
                    blob=base64.b64encode(wav).decode(),
                ),
            )

        @server.resource("speech://say/{text}", mime_type="audio/wav")
        async def speech(text: str) -> bytes:
            """The text spoken in the default voice, as WAV."""
            return await _speech(pool, settings, text, "")
