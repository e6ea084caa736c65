"""One reply's oversized invocation fails that reply alone; the stream the other replies share
stays up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import RemoteMiddleware, serve_middleware
from hookmesh.schema import AgentEvent, MessageKind, make_user_text
from tests.agent_helpers import SHORT_TIMEOUT, collect

pytestmark = pytest.mark.timeout(60)

LIMIT = 256 * 1024


class ContextReader(Middleware):
    """Sees the conversation at every model call (so each invocation carries it)."""

    needs_context = True

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler()


async def test_an_oversized_invocation_fails_only_its_reply(kind: MessageKind) -> None:
    server = await serve_middleware(ContextReader(), max_message_bytes=LIMIT)
    remote = await RemoteMiddleware.connect(
        f"127.0.0.1:{server.port}", failure_mode="fail_closed", timeout=SHORT_TIMEOUT
    )
    try:
        assert remote.link.max_message_bytes == LIMIT

        async def reply(text: str) -> list[AgentEvent]:
            agent = Agent(ScriptedChatModel(["ok"]), kind=kind, middlewares=[remote])
            return await collect(agent.reply(make_user_text(kind, text)))

        async with asyncio.timeout(SHORT_TIMEOUT):
            big, *small = await asyncio.gather(
                reply("x" * (2 * LIMIT)), *(reply(f"hello {i}") for i in range(10))
            )
        end = big[-1]
        assert end.type == "reply_end" and end.finish_reason == "error"
        assert end.error is not None and end.error.reason == "INVOCATION_TOO_LARGE"
        assert [r[-1].finish_reason for r in small] == ["completed"] * 10  # type: ignore[union-attr]
        after = await reply("still there?")
        assert after[-1].finish_reason == "completed"  # type: ignore[union-attr]
    finally:
        await remote.aclose()
        await server.stop(None)


def test_read_only_items_fold_only_within_the_sidecars_limit() -> None:
    """Under load read-only items of one invocation travel folded together, but a folded
    message never outgrows the limit each item was checked against."""
    from hookmesh.remote._stream import coalesce
    from hookmesh.schema import TextBlockDeltaEvent, event_to_proto
    from hookmesh.v1 import middleware_pb2

    def item(n: int) -> tuple[Any, int]:
        event = TextBlockDeltaEvent(reply_id="r", block_id="b", delta=f"{n}" + "x" * 1000)
        request = middleware_pb2.InterceptRequest(invocation_id="1")
        request.item.event.CopyFrom(event_to_proto(event))
        return request, request.ByteSize()

    batch: list[Any] = [item(n) for n in range(5)]
    size = batch[0][1]
    sent = coalesce(batch, limit=2 * size)
    assert [1 + len(m.item.more_events) for m in sent] == [2, 2, 1]
    assert all(m.ByteSize() <= 2 * size for m in sent)
    deltas = [
        e.text_block_delta.delta[0] for m in sent for e in (m.item.event, *m.item.more_events)
    ]
    assert deltas == ["0", "1", "2", "3", "4"]  # in order, none lost
    assert len(coalesce([item(n) for n in range(5)], limit=10 * size)) == 1
