"""The test session's PostgreSQL 18 + pgvector server (`hookmesh.testing.EmbeddedPostgres`).

Import the fixture into a conftest (or test module) that needs it:
``from tests.pg import postgres_url  # noqa: F401``. Tests isolate themselves by schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookmesh.testing import EmbeddedPostgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server for the whole test session; tests isolate themselves by schema."""
    with EmbeddedPostgres() as server:
        yield server.url
