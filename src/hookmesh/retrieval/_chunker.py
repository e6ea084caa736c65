"""Token-window chunking that cuts only at paragraph and sentence boundaries."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ._embedder import Tokenizer
from ._types import Chunk, ChunkingOptions, Metadata

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
# A sentence ends at . ! ? … (then optional closing quotes/brackets) followed by whitespace,
# or at a CJK full stop / exclamation / question mark (no space needed after those).
_SENTENCE_END = re.compile(
    r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s)"  # . ! ? … and closing quotes / brackets
    r"|[\u3002\uff01\uff1f]+[\u201d\u2019\u300d\u300f\uff09]*"  # CJK full stop, ! and ? and closers
)
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "no", "fig"}
    | {"cf", "approx", "inc", "ltd", "co"}
)
_WORD_BEFORE = re.compile(r"(\w+(?:\.\w+)*)\.$")


@dataclass(frozen=True, slots=True)
class _Segment:
    start: int
    end: int
    tokens: int
    paragraph: int  # index of the paragraph it belongs to
    piece_of_long: bool = False  # a token window of a sentence longer than a chunk


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        yield _strip(text, start, match.start())
        start = match.end()
    yield _strip(text, start, len(text))


def _starts_word(text: str, spans: list[tuple[int, int]], i: int) -> bool:
    """Whether token `i` begins a word (not a ``##`` continuation of the one before)."""
    if i == 0:
        return True
    previous_end, start = spans[i - 1][1], spans[i][0]
    return start > previous_end or not text[start].isalnum() or not text[previous_end - 1].isalnum()


def _is_abbreviation(text: str, start: int, dot: int) -> bool:
    match = _WORD_BEFORE.search(text, max(start, dot - 24), dot + 1)
    if match is None:
        return False
    word = match.group(1).lower()
    # a single letter ("J. Smith") or a known abbreviation ("e.g.", "Dr.")
    return len(word) == 1 or word in _ABBREVIATIONS


def sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each sentence in ``text[start:end]``, surrounding space stripped."""
    begin = start
    for match in _SENTENCE_END.finditer(text, start, end):
        stop = match.end()
        if (
            text[match.start()] == "."
            and match.group() == "."
            and _is_abbreviation(text, begin, match.start())
        ):
            continue
        s, e = _strip(text, begin, stop)
        if s < e:
            yield s, e
        begin = stop
    s, e = _strip(text, begin, end)
    if s < e:
        yield s, e


class Chunker:
    """Cuts a text into chunks of at most ``max_tokens`` tokens of `tokenizer`.

    Paragraphs (split at blank lines) and sentences are packed whole, greedily. A chunk
    ends early at a paragraph boundary rather than split a paragraph that would fit whole in
    the next chunk (when the chunk is at least half full). When a cut falls inside a
    paragraph, the next chunk starts with the trailing whole sentences of the previous one
    that fit in ``overlap_tokens``. A sentence longer than ``max_tokens`` is the only thing
    ever cut inside: into token windows of at most ``max_tokens``, each overlapping the one
    before by about ``overlap_tokens`` (moved to the nearest word start; exact only inside
    a word longer than a window).

    Every chunk's text is ``text[start:end]`` of the original (no normalisation), so offsets
    slice back to it. Chunk ids are ``{document_id}#{index}``: the same text and options give
    the same chunks.

    Args:
        tokenizer: Counts tokens; use the embedder's own so chunks are never truncated.
        options: Sizes; ``max_tokens`` must not exceed ``tokenizer.max_input_tokens``.
    """

    def __init__(self, tokenizer: Tokenizer, options: ChunkingOptions | None = None) -> None:
        self.tokenizer = tokenizer
        self.options = options or ChunkingOptions()
        if not 1 <= self.options.max_tokens <= tokenizer.max_input_tokens:
            raise ValueError(
                f"max_tokens must be 1-{tokenizer.max_input_tokens}, got {self.options.max_tokens}"
            )
        if not 0 <= self.options.overlap_tokens <= self.options.max_tokens // 2:
            raise ValueError("overlap_tokens must be between 0 and max_tokens // 2")

    def chunk(self, document_id: str, text: str, metadata: Metadata | None = None) -> list[Chunk]:
        """The chunks of `text`, in order (none for an empty or blank text)."""
        spans = self.tokenizer.token_spans(text)
        starts = [s for s, _ in spans]
        segments = list(self._segments(text, spans, starts))
        meta = dict(metadata or {})
        chunks = []
        for index, group in enumerate(self._pack(segments)):
            start, end = group[0].start, max(s.end for s in group)
            chunks.append(
                Chunk(
                    id=f"{document_id}#{index}",
                    document_id=document_id,
                    index=index,
                    text=text[start:end],
                    start=start,
                    end=end,
                    token_count=bisect.bisect_left(starts, end) - bisect.bisect_left(starts, start),
                    metadata=meta,
                )
            )
        return chunks

    # -- segmentation -----------------------------------------------------------------------

    def _segments(
        self, text: str, spans: list[tuple[int, int]], starts: list[int]
    ) -> Iterator[_Segment]:
        limit = self.options.max_tokens
        for number, (p_start, p_end) in enumerate(_paragraphs(text)):
            if p_start >= p_end:
                continue
            for s_start, s_end in sentences(text, p_start, p_end):
                first = bisect.bisect_left(starts, s_start)
                last = bisect.bisect_left(starts, s_end)
                count = last - first
                if count <= limit:
                    yield _Segment(s_start, s_end, count, number)
                else:
                    yield from self._windows(text, spans, first, last, s_end, number)

    def _windows(
        self,
        text: str,
        spans: list[tuple[int, int]],
        first: int,
        last: int,
        sentence_end: int,
        paragraph: int,
    ) -> Iterator[_Segment]:
        """Token windows over the sentence whose tokens are ``spans[first:last]``: each ends
        before a word start where one exists; the next starts ``overlap_tokens`` earlier, moved
        forward (else back) to the nearest word start so no window starts mid-word."""
        limit, overlap = self.options.max_tokens, self.options.overlap_tokens
        begin = first
        while True:
            stop = begin + limit
            if stop >= last:
                yield _Segment(spans[begin][0], sentence_end, last - begin, paragraph, True)
                return
            for cut in range(stop, begin + limit // 2, -1):  # back off at most half a window
                if _starts_word(text, spans, cut):
                    stop = cut
                    break
            yield _Segment(spans[begin][0], spans[stop - 1][1], stop - begin, paragraph, True)
            nxt = max(stop - overlap, begin + 1)
            starts = [j for j in range(nxt, stop) if _starts_word(text, spans, j)] or [
                j for j in range(nxt - 1, begin, -1) if _starts_word(text, spans, j)
            ]
            begin = starts[0] if starts else nxt

    # -- packing ----------------------------------------------------------------------------

    def _pack(self, segments: list[_Segment]) -> Iterator[list[_Segment]]:
        limit, overlap = self.options.max_tokens, self.options.overlap_tokens
        current: list[_Segment] = []
        used = 0
        i = 0
        while i < len(segments):
            seg = segments[i]
            if seg.piece_of_long and seg.tokens == limit:
                # a full window of a long sentence is a chunk of its own
                if current:
                    yield current
                yield [seg]
                current, used = [], 0
                i += 1
                continue
            if used + seg.tokens <= limit and not self._close_at_paragraph(
                segments, i, current, used
            ):
                current.append(seg)
                used += seg.tokens
                i += 1
                continue
            yield current
            carry: list[_Segment] = []
            if seg.paragraph == current[-1].paragraph and not current[-1].piece_of_long:
                budget = min(overlap, limit - seg.tokens)
                for previous in reversed(current):
                    if previous.tokens > budget or previous.piece_of_long:
                        break
                    carry.insert(0, previous)
                    budget -= previous.tokens
            current = carry
            used = sum(s.tokens for s in carry)
        if current:
            yield current

    def _close_at_paragraph(
        self, segments: list[_Segment], i: int, current: list[_Segment], used: int
    ) -> bool:
        """End the chunk before a new paragraph that does not fit in what is left but would
        fit whole in a fresh chunk (only when the chunk is already at least half full)."""
        limit = self.options.max_tokens
        if not current or segments[i].paragraph == current[-1].paragraph or used * 2 < limit:
            return False
        paragraph = segments[i].paragraph
        size = 0
        for seg in segments[i:]:
            if seg.paragraph != paragraph:
                break
            size += seg.tokens
        return used + size > limit and size <= limit
