"""Fixtures shared by the integration tests: the session-wide PostgreSQL server and the agent
session store's backends."""

from tests.pg import postgres_url  # noqa: F401
from tests.session_backends import postgres_backend, session_backend  # noqa: F401
