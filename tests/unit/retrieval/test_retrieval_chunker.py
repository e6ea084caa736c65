"""Chunking by the embedder's tokens at paragraph and sentence boundaries."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookmesh.retrieval import Chunk, Chunker, ChunkingOptions, RegexTokenizer, WordPieceTokenizer
from hookmesh.retrieval._chunker import sentences

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Retrieval augmented generation grounds answers in documents!",
    "Does the chunker keep whole sentences together?",
    "Dr. Smith met J. R. Tolkien in 1937, e.g. at a pub.",
    "Vectors are normalised to unit length before the dot product.",
    "Short one.",
]


def _tokens(tokenizer: WordPieceTokenizer, text: str) -> int:
    return len(tokenizer.token_spans(text))


def _check_invariants(
    text: str, chunks: list[Chunk], tokenizer: WordPieceTokenizer, limit: int
) -> None:
    for i, chunk in enumerate(chunks):
        assert chunk.id == f"{chunk.document_id}#{i}"
        assert chunk.index == i
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip()
        assert chunk.token_count == _tokens(tokenizer, chunk.text) <= limit
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end  # always progresses


def test_empty_and_blank_documents_have_no_chunks(tokenizer: WordPieceTokenizer) -> None:
    chunker = Chunker(tokenizer)
    assert chunker.chunk("d", "") == []
    assert chunker.chunk("d", " \n\n \t ") == []


def test_a_short_document_is_one_chunk(tokenizer: WordPieceTokenizer) -> None:
    text = "\n  Hello world. This is short.  \n"
    (chunk,) = Chunker(tokenizer).chunk("doc-1", text, {"lang": "en"})
    assert chunk.id == "doc-1#0"
    assert chunk.text == "Hello world. This is short."
    assert text[chunk.start : chunk.end] == chunk.text
    assert chunk.metadata == {"lang": "en"}
    assert chunk.token_count == _tokens(tokenizer, chunk.text)


def test_never_cuts_inside_a_sentence(tokenizer: WordPieceTokenizer) -> None:
    text = " ".join(SENTENCES * 6)
    options = ChunkingOptions(max_tokens=40, overlap_tokens=0)
    chunks = Chunker(tokenizer, options).chunk("d", text)
    assert len(chunks) > 3
    _check_invariants(text, chunks, tokenizer, 40)
    for chunk in chunks:
        assert chunk.text.startswith(tuple(s[:12] for s in SENTENCES))
        assert chunk.text.endswith((".", "!", "?"))
    # no overlap: the chunks tile the text
    for a, b in itertools.pairwise(chunks):
        assert a.end <= b.start and not text[a.end : b.start].strip()


def test_overlap_repeats_whole_trailing_sentences(tokenizer: WordPieceTokenizer) -> None:
    text = " ".join(SENTENCES * 6)
    options = ChunkingOptions(max_tokens=48, overlap_tokens=20)
    chunks = Chunker(tokenizer, options).chunk("d", text)
    _check_invariants(text, chunks, tokenizer, 48)
    overlapping = 0
    for a, b in itertools.pairwise(chunks):
        if b.start < a.end:
            overlapping += 1
            shared = text[b.start : a.end]
            assert _tokens(tokenizer, shared) <= 20
            assert a.text.endswith(shared)  # the shared part is the tail of the previous chunk
            assert shared.startswith(tuple(s[:12] for s in SENTENCES))  # ... of whole sentences
    assert overlapping >= len(chunks) // 2


def test_paragraphs_that_fit_are_not_split(tokenizer: WordPieceTokenizer) -> None:
    paragraphs = [" ".join(SENTENCES[i : i + 3]) for i in range(4)]
    text = "\n\n".join(paragraphs)
    sizes = [_tokens(tokenizer, p) for p in paragraphs]
    limit = max(sizes) + 5
    chunks = Chunker(tokenizer, ChunkingOptions(max_tokens=limit, overlap_tokens=8)).chunk(
        "d", text
    )
    _check_invariants(text, chunks, tokenizer, limit)
    for paragraph in paragraphs:
        assert any(paragraph in chunk.text for chunk in chunks), paragraph
    # a chunk ending at a paragraph boundary carries nothing of it into the next chunk
    for a, b in itertools.pairwise(chunks):
        assert a.end <= b.start


def test_a_sentence_longer_than_a_chunk_is_windowed(tokenizer: WordPieceTokenizer) -> None:
    giant = " ".join(f"token{i} and more words" for i in range(120)) + "."
    text = "Before it. " + giant + " After it."
    options = ChunkingOptions(max_tokens=50, overlap_tokens=10)
    chunks = Chunker(tokenizer, options).chunk("d", text)
    _check_invariants(text, chunks, tokenizer, 50)
    inside = [c for c in chunks if giant.startswith(c.text[:20]) or c.text[:20] in giant]
    assert len(inside) >= 5
    for a, b in itertools.pairwise(chunks):
        if a.start >= text.index(giant) and b.end <= text.index(giant) + len(giant):
            shared = text[b.start : a.end]
            assert 0 < _tokens(tokenizer, shared) <= 10
    for chunk in chunks:  # no window starts in the middle of a word
        assert chunk.start == 0 or not text[chunk.start - 1].isalnum()
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())


def test_one_word_longer_than_a_chunk_is_cut_by_tokens(tokenizer: WordPieceTokenizer) -> None:
    text = "a" * 3000  # one "word", many word pieces
    chunks = Chunker(tokenizer, ChunkingOptions(max_tokens=64, overlap_tokens=8)).chunk("d", text)
    _check_invariants(text, chunks, tokenizer, 64)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for a, b in itertools.pairwise(chunks):
        assert _tokens(tokenizer, text[b.start : a.end]) <= 8


def test_unicode_offsets_slice_back(tokenizer: WordPieceTokenizer) -> None:
    text = (
        "Café naïve — résumé 😀 déjà vu. "
        "東京は日本の首都です。大阪は大きい都市です\uff01"
        "Ελληνικά κείμενα εδώ. Combining: e\u0301 x\u0301y.\n\n"
        "Emoji line 👩‍👩‍👧 family. Русский текст тоже здесь. עברית כאן."
    ) * 4
    chunks = Chunker(tokenizer, ChunkingOptions(max_tokens=24, overlap_tokens=6)).chunk("ü", text)
    assert len(chunks) > 4
    _check_invariants(text, chunks, tokenizer, 24)
    assert chunks[0].id == "ü#0"


def test_chunks_are_deterministic(tokenizer: WordPieceTokenizer) -> None:
    text = "\n\n".join(" ".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(6))
    chunker = Chunker(tokenizer, ChunkingOptions(max_tokens=32, overlap_tokens=8))
    assert chunker.chunk("x", text) == chunker.chunk("x", text)


def test_sentence_splitting() -> None:
    text = 'He said "stop." Then left! Dr. Who? e.g. this. Pi is 3.14 here. 終わり。次'
    found = [text[s:e] for s, e in sentences(text, 0, len(text))]
    assert found == [
        'He said "stop."',
        "Then left!",
        "Dr. Who?",
        "e.g. this.",
        "Pi is 3.14 here.",
        "終わり。",
        "次",
    ]


def test_options_are_checked(tokenizer: WordPieceTokenizer) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        Chunker(tokenizer, ChunkingOptions(max_tokens=300))
    with pytest.raises(ValueError, match="overlap"):
        Chunker(tokenizer, ChunkingOptions(max_tokens=40, overlap_tokens=21))


def test_works_with_any_tokenizer() -> None:
    text = "One two three. Four five six. Seven eight nine."
    chunks = Chunker(RegexTokenizer(), ChunkingOptions(max_tokens=8, overlap_tokens=4)).chunk(
        "d", text
    )
    assert [c.text for c in chunks] == [
        "One two three. Four five six.",
        "Four five six. Seven eight nine.",
    ]


_WORDS = st.sampled_from(
    ["alpha", "beta", "gamma", "δέλτα", "東京", "naïve", "x", "supercalifragilistic", "42", "😀"]
)
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=40).map(lambda ws: " ".join(ws) + ".")
_PARAGRAPH = st.lists(_SENTENCE, min_size=1, max_size=6).map(" ".join)
_TEXT = st.lists(_PARAGRAPH, min_size=0, max_size=5).map("\n\n".join)


@given(text=_TEXT, limit=st.integers(16, 64), overlap_share=st.integers(0, 2))
def test_properties(
    tokenizer: WordPieceTokenizer, text: str, limit: int, overlap_share: int
) -> None:
    overlap = limit * overlap_share // 4  # 0, a quarter or half
    chunks = Chunker(tokenizer, ChunkingOptions(limit, overlap)).chunk("p", text)
    _check_invariants(text, chunks, tokenizer, limit)
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())
    if not re.search(r"\S", text):
        assert chunks == []
