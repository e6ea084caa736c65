"""Shared fixtures for the retrieval unit tests: one real embedder for the whole session."""

from __future__ import annotations

import pytest

from hookmesh.retrieval import MiniLMEmbedder, WordPieceTokenizer


@pytest.fixture(scope="session")
def tokenizer(embedder: MiniLMEmbedder) -> WordPieceTokenizer:
    """The embedder's own tokenizer."""
    return embedder.tokenizer
