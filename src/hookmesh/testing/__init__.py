"""Helpers for testing and benchmarking hookmesh deployments: a throwaway PostgreSQL server,
a real Envoy in front of loopback replicas, and hookmesh servers in processes of their own."""

from hookmesh._processes import stop_process
from hookmesh.testing._envoy import EnvoyProxy, envoy_binary, render_envoy_config
from hookmesh.testing._postgres import EmbeddedPostgres, postgres_bin
from hookmesh.testing._processes import ServerProcess, agent_process, hookmesh_process

__all__ = [
    "EmbeddedPostgres",
    "EnvoyProxy",
    "ServerProcess",
    "agent_process",
    "envoy_binary",
    "hookmesh_process",
    "postgres_bin",
    "render_envoy_config",
    "stop_process",
]
