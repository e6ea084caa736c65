"""Helpers for testing and benchmarking hookmesh deployments: a throwaway PostgreSQL server."""

from hookmesh.testing._postgres import EmbeddedPostgres, postgres_bin

__all__ = ["EmbeddedPostgres", "postgres_bin"]
