"""YAML front matter: the ``---``-fenced header of markdown files (memory files, skills)."""

from __future__ import annotations

from typing import Any

import yaml


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """The front matter of `text` as a mapping, and the body after it.

    None (and the whole text as the body) when the text does not start with ``---``, the
    header is not closed by a ``---`` line, is not valid YAML, or is not a mapping.
    """
    if not text.startswith("---"):
        return None, text
    head, closed, rest = text[3:].partition("\n---")
    if not closed:
        return None, text
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        return None, text
    if not isinstance(data, dict):
        return None, text
    return data, rest.partition("\n")[2]
