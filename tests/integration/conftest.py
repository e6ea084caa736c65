"""Fixtures shared by the integration tests: the session-wide PostgreSQL server, the agent
session store's backends, and a middleware served in process (`serve`)."""

from tests.pg import postgres_url  # noqa: F401
from tests.served_middleware import serve  # noqa: F401
from tests.session_backends import postgres_backend, session_backend  # noqa: F401
