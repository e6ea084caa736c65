"""Every failure of the conformance kit names a section of docs/remote-protocol.md: each of
those sections exists."""

from __future__ import annotations

import re
from pathlib import Path

from hookmesh.conformance._runner import _SECTIONS, section

_DOC = Path(__file__).resolve().parents[2] / "docs" / "remote-protocol.md"


def test_every_section_the_kit_names_is_a_heading_of_the_doc() -> None:
    headings = set(re.findall(r"^#+ (.+)$", _DOC.read_text(), flags=re.MULTILINE))
    assert {title for _, title in _SECTIONS} - headings == set()


def test_a_rule_gets_its_own_section_before_the_catch_all() -> None:
    assert section("stream.nothing_after_done") == "docs/remote-protocol.md § `done` and its result"
    assert section("on_model_call.stream[flat]").endswith("on_model_call, HOOK_MODE_INTERCEPT")
    assert section("on_acting.drop[flat]").endswith("§ Conformance")
    assert section("on_model_call.stop[flat]").endswith("§ `done` and its result")
    assert section("on_reply.stop[agentic]").endswith("§ `done` and its result")
