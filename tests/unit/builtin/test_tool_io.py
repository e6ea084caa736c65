"""The helpers tool-contributing middlewares share (MCP tools, remote agents)."""

from __future__ import annotations

from hookmesh.middleware.builtin._support._tool_io import output_text
from hookmesh.schema import ImageBlock, InlineSource, TextBlock


def test_output_text_joins_the_text_blocks_and_leaves_media_out() -> None:
    image = ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))
    assert output_text([TextBlock(text="a"), image, TextBlock(text="b")]) == "a\nb"
    assert output_text([image]) == ""
    assert output_text([]) == ""
