"""Cutting streamed text into sentences and clauses that can be spoken before the rest arrives."""

from __future__ import annotations

# Latin, then CJK full-width punctuation (escaped: they look like the Latin ones).
_SENTENCE_ENDS = frozenset(".!?\u2026\u3002\uff01\uff1f")
_CLAUSE_ENDS = frozenset(",;:\u2014\u3001\uff0c\uff1b\uff1a")
_CLOSERS = frozenset("\"')]}\u00bb\u201d\u2019")

MIN_CLAUSE_CHARS = 24
"""A clause is cut off on its own only when at least this long (short ones sound choppy)."""
MAX_SEGMENT_CHARS = 400
"""Text with no boundary is cut at the last space before this many characters."""


class Segmenter:
    """Accumulates text deltas and returns each sentence or clause once its end is certain.

    An end is terminal punctuation (``.!?`` and CJK equivalents; ``,;:`` for a clause of at
    least `min_clause_chars`), optionally followed by closing quotes or brackets, and then
    white space; or a line break. Punctuation at the very end of the text so far is not an
    end yet (``3.`` may become ``3.14``). Segments come back stripped and never empty.

    Args:
        min_clause_chars: Shortest clause cut at a comma, semicolon or colon.
        max_chars: Longest segment; longer text is cut at a space.
    """

    def __init__(
        self, *, min_clause_chars: int = MIN_CLAUSE_CHARS, max_chars: int = MAX_SEGMENT_CHARS
    ) -> None:
        self.min_clause_chars = min_clause_chars
        self.max_chars = max_chars
        self._buffer = ""

    def push(self, delta: str) -> list[str]:
        """Add `delta`; return the segments it completed, in order."""
        self._buffer += delta
        out: list[str] = []
        while True:
            cut = self._boundary()
            if cut is None:
                break
            segment, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:]
            if segment:
                out.append(segment)
        return out

    def flush(self) -> list[str]:
        """The text left over (the input ended): zero or one segments."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []

    def _boundary(self) -> int | None:
        """Where the first complete segment of the buffer ends, or None."""
        text = self._buffer
        n = len(text)
        start = len(text) - len(text.lstrip())
        for i in range(start, n):
            ch = text[i]
            if ch == "\n":
                return i + 1
            sentence = ch in _SENTENCE_ENDS
            if not sentence and ch not in _CLAUSE_ENDS:
                if i - start + 1 >= self.max_chars:
                    return self._forced(start, i + 1)
                continue
            j = i + 1
            while j < n and text[j] in _CLOSERS:
                j += 1
            if j >= n:
                return None  # the next delta decides
            if not text[j].isspace():
                continue
            if sentence or j - start >= self.min_clause_chars:
                return j
        return None

    def _forced(self, start: int, end: int) -> int:
        """Cut a run without boundaries at its last space (or, with none, at `end`)."""
        space = self._buffer.rfind(" ", start, end)
        return space + 1 if space > start else end
