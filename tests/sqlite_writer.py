"""A process that commits to a SQLite knowledge store, says so, and waits to be killed.

The kill -9 durability test runs it (``python -m tests.sqlite_writer PATH``): it writes with
the real all-MiniLM-L6-v2 embedder, exactly as a service would, so the reopened store's
dense index is checked against real vectors.
"""

from __future__ import annotations

import asyncio
import sys

from hookmesh.retrieval import Document, SqliteKnowledgeStore, default_embedder

NOTES = [f"durable note number {i} about herons" for i in range(3)]
"""What the writer ingests as d0, d1, d2 (d1 is then deleted)."""


async def main(path: str) -> None:
    store = await SqliteKnowledgeStore.open(path, default_embedder())
    await store.create_knowledge_base("kb")
    for i, text in enumerate(NOTES):
        await store.ingest("kb", [Document(f"d{i}", text)])
    await store.delete_document("kb", "d1")
    print("committed", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # hold the connections open until killed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
