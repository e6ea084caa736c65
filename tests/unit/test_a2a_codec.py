"""hookmesh.a2a: parts ⇄ blocks without loss, the pause message, and the answers to it."""

from __future__ import annotations

import json

import pytest
from a2a.types import a2a_pb2

from hookmesh.a2a import (
    AnswerError,
    answer_of,
    block_from_part,
    blocks_from_parts,
    data_part,
    part_from_block,
    parts_from_blocks,
    pause_parts,
    pending_of_parts,
)
from hookmesh.schema import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    InlineSource,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    UrlSource,
    VideoBlock,
)

BLOCKS = [
    TextBlock(text="hello"),
    ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"), name="a.png"),
    AudioBlock(source=InlineSource(data=b"RIFF", mime_type="audio/wav")),
    VideoBlock(source=UrlSource(url="https://v.example/clip.mp4", mime_type="video/mp4")),
    DocumentBlock(source=InlineSource(data=b"%PDF", mime_type="application/pdf"), name="r.pdf"),
    DocumentBlock(
        source=InlineSource(
            data=json.dumps({"city": "Oslo"}).encode(), mime_type="application/json"
        )
    ),
]


def test_blocks_survive_a_round_trip_through_parts() -> None:
    parts = parts_from_blocks(BLOCKS)
    assert [p.WhichOneof("content") for p in parts] == ["text", "raw", "raw", "url", "raw", "data"]
    assert parts[1].filename == "a.png" and parts[1].media_type == "image/png"
    back = blocks_from_parts(parts)
    assert back[:5] == BLOCKS[:5]
    assert json.loads(back[5].source.data) == {"city": "Oslo"}  # type: ignore[union-attr]


def test_non_content_blocks_are_left_out_and_unknown_types_are_documents() -> None:
    assert part_from_block(ReasoningBlock(text="hmm")) is None
    block = block_from_part(a2a_pb2.Part(raw=b"x"))
    assert block.type == "document" and block.source.mime_type == "application/octet-stream"


def test_a_pause_is_read_back_and_answered() -> None:
    calls = [ToolCall(id="c1", name="delete_file", arguments='{"path": "x"}')]
    parts = pause_parts("confirmation", calls)
    awaiting, read = pending_of_parts(parts)  # type: ignore[misc]
    assert awaiting == "confirmation" and read[0].name == "delete_file"
    assert json.loads(read[0].arguments) == {"path": "x"}
    yes = answer_of("confirmation", calls, [a2a_pb2.Part(text="Yes.")])
    assert yes.confirmations == [{"call_id": "c1", "confirmed": True, "reason": ""}]
    no = answer_of("confirmation", calls, [a2a_pb2.Part(text="not that file")])
    assert no.confirmations[0]["confirmed"] is False
    assert no.confirmations[0]["reason"] == "not that file"
    given = data_part({"external_results": [{"call_id": "c1", "output": "42"}]})
    result = answer_of("external_execution", calls, [given])
    assert result.external_results[0][0] == "c1" and result.external_results[0][1][0].text == "42"


def test_an_answer_for_the_wrong_calls_is_refused() -> None:
    calls = [ToolCall(id="c1", name="a"), ToolCall(id="c2", name="b")]
    with pytest.raises(AnswerError, match="missing c2"):
        answer_of("confirmation", calls, [data_part({"confirmations": [{"call_id": "c1"}]})])
    with pytest.raises(AnswerError, match="several calls wait"):
        answer_of("external_execution", calls, [a2a_pb2.Part(text="42")])
    assert pending_of_parts([a2a_pb2.Part(text="just text")]) is None
