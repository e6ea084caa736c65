"""The embedder and tokenizer interfaces every store and chunker is written against."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
"""An ``(n, dimension)`` float32 array, each row L2-normalised."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors without blocking the event loop.

    Implementations batch internally, run the model in worker threads, and are safe to share
    between stores, services and concurrent calls.
    """

    @property
    def name(self) -> str:
        """A stable model id stored with the vectors (a different name means incomparable)."""
        ...

    @property
    def dimension(self) -> int:
        """Vector dimension."""
        ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length float32 row per text, in order (``(0, dimension)`` for none)."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Where a text's tokens are: what chunkers count and cut by."""

    @property
    def max_input_tokens(self) -> int:
        """Most content tokens (special tokens excluded) the embedder reads of one text."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets of each token of `text`, in order, without
        special tokens and without truncation."""
        ...


_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class RegexTokenizer:
    """Words and single punctuation marks as tokens: for embedders without a local tokenizer.

    Args:
        max_input_tokens: What the embedder reads of one text.
    """

    def __init__(self, max_input_tokens: int = 256) -> None:
        self._max = max_input_tokens

    @property
    def max_input_tokens(self) -> int:
        return self._max

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]


def l2_normalise(vectors: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length (all-zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def check_texts(texts: Sequence[str]) -> list[str]:
    """`texts` as a list, refusing a bare string (which would embed one character each).

    Raises:
        TypeError: Not a sequence of strings.
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError("embed() takes a sequence of strings, not a single string")
    out = list(texts)
    for text in out:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return out
