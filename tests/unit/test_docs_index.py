"""docs/README.md, the docs' index, links every page under docs/."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"


def test_the_index_links_every_page() -> None:
    index = (DOCS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([^)#]+\.md)\)", index)) - {"../README.md"}
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} - {"README.md"}
    assert sorted(pages - linked) == []
    assert sorted(linked - pages) == []
