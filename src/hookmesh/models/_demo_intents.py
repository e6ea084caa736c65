"""What the demo model recognises in a user's words: one intent per feature of the suite."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _city(text: str) -> dict[str, Any]:
    """``in Oslo``, ``in New York today`` → the capitalised words after ``in``; empty when
    no city is named (the model then asks for one instead of guessing)."""
    found = re.search(r"\b(?:in|for|at)\s+((?:[A-Z][\w'-]*)(?:\s+[A-Z][\w'-]*)*)", text)
    return {"city": found.group(1) if found else ""}


def _path(text: str) -> dict[str, Any]:
    """A file name (``notes.txt``, ``docs/a.md``), else the word after delete/remove."""
    named = re.search(r"[\w./-]+\.\w+", text)
    if named:
        return {"path": named.group(0).rstrip(".")}
    word = re.search(r"\b(?:delete|remove)\s+(?:the\s+|my\s+)?(?:file\s+)?([\w./-]+)", text, re.I)
    return {"path": word.group(1) if word else "notes.txt"}


def _fact(text: str) -> dict[str, Any]:
    """The fact to keep: the words after "remember (that)", "note that", "don't forget"."""
    fact = re.sub(
        r"^\s*(?:please\s+)?(?:remember(?:\s+that)?|note\s+that|don'?t\s+forget(?:\s+that)?)"
        r"[\s:,]*",
        "",
        text,
        flags=re.I,
    ).strip()
    fact = fact[:1].upper() + fact[1:]
    return {"text": fact if fact.endswith((".", "!", "?")) else f"{fact}."}


def _query(text: str) -> dict[str, Any]:
    return {"query": text.strip()}


def _request(text: str) -> dict[str, Any]:
    """A handoff's message: what follows the colon, else all of it."""
    _, colon, rest = text.partition(":")
    return {"message": (rest if colon and rest.strip() else text).strip()}


@dataclass(frozen=True)
class Intent:
    """A feature the demo model shows, the words that ask for it and the tool it calls."""

    name: str
    """``weather``, ``delete``, ``remember``, ``recall``, ``speak``, ``handoff`` or
    ``search``."""
    pattern: re.Pattern[str]
    """Matched against the user's latest words (case-insensitive)."""
    tool: str
    """The tool it calls; empty for one answered in text alone."""
    arguments: Callable[[str], dict[str, Any]]
    """The call's arguments, read from the user's words."""


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.I)


_WEATHER = _words("weather", "forecast", "temperature", "snow(?:ing)?", "rain(?:ing)?", "wear")
_REMEMBER = re.compile(r"^\s*(?:please\s+)?(?:remember|note that|don'?t forget)\b", re.I)
_RECALL = _words(
    r"what do (?:i|you) (?:like|know|remember)",
    "recall",
    r"do you remember",
    r"what(?:'s| is) my",
    r"what did i",
)
_SEARCH = _words(
    "how", "why", "explain", "search", "docs?", "documentation", "knowledge base", "handbook",
    r"what is", r"what are",
)  # fmt: skip

INTENTS = (
    Intent("weather", _WEATHER, "get_weather", _city),
    Intent("delete", _words("delete", "remove", "rm"), "delete_file", _path),
    Intent("remember", _REMEMBER, "add_memory", _fact),
    Intent("recall", _RECALL, "search_memory", _query),
    Intent("speak", _words("say", "speak", "read aloud", "out loud", "aloud"), "", _query),
    Intent("handoff", _words("chef"), "transfer_to_chef", _request),
    Intent("search", _SEARCH, "search_knowledge", _query),
)
"""In the order they are tried: the first that matches wins."""


def intent_of(text: str) -> Intent | None:
    """The first intent whose words `text` has, or None."""
    return next((i for i in INTENTS if i.pattern.search(text)), None)
