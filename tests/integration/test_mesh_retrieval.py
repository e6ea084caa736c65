"""Two retrieval service replicas on one PostgreSQL behind a real Envoy: a document ingested
through one replica is found by a search the other replica serves."""

from __future__ import annotations

import uuid

import pytest

from hookmesh.client import RetrievalClient
from hookmesh.retrieval import Document
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.testing import EnvoyProxy
from tests.agent_helpers import SHORT_TIMEOUT
from tests.envoy import CONFIG as ENVOY_CONFIG

pytestmark = pytest.mark.timeout(120)


async def test_ingest_through_one_replica_search_through_the_other(postgres_url: str) -> None:
    import psycopg

    namespace = f"r_{uuid.uuid4().hex[:16]}"
    config = load_retrieval_config(None, store=postgres_url, namespace=namespace)
    replicas = [
        await start_retrieval_service(config, address="127.0.0.1:0"),
        await start_retrieval_service(config, address="127.0.0.1:0"),
    ]
    addresses = [f"127.0.0.1:{r.port}" for r in replicas]
    try:
        async with (
            EnvoyProxy({"retrieval": addresses}, ENVOY_CONFIG) as envoy,
            RetrievalClient(envoy.address("retrieval"), timeout=SHORT_TIMEOUT * 3) as client,
        ):

            async def served() -> dict[str, int]:
                hosts = (await envoy.hosts())["retrieval"]
                return {a: hosts[a]["rq_success"] for a in addresses}

            await client.create_knowledge_base("handbook")
            before = await served()
            report = await client.ingest(
                "handbook",
                [Document("kites", "Kites fly best in a steady wind of fifteen knots.")],
            )
            assert report.ingested_ids == ["kites"]
            after_ingest = await served()
            (ingested_on,) = [a for a in addresses if after_ingest[a] > before[a]]
            hits = await client.search("what wind suits a kite", ["handbook"], top_k=1)
            after_search = await served()
            (searched_on,) = [a for a in addresses if after_search[a] > after_ingest[a]]
            assert searched_on != ingested_on  # round robin: the other replica answered
            assert [h.document_id for h in hits] == ["kites"]
    finally:
        for replica in replicas:
            await replica.stop(None)
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")  # type: ignore[arg-type]
