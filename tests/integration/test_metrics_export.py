"""Metrics leave the process: a service's Prometheus endpoint over HTTP, and OTLP/gRPC to a
collector when the standard variables are set (in a process of its own: the meter provider
is global)."""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)

from hookmesh.client import AgentClient
from hookmesh.services.agent import load_config, start_agent_service

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).parents[2]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()  # type: ignore[no-any-return]


async def test_the_agent_service_serves_prometheus_metrics(
    tmp_path: Path, metric_reader: Any
) -> None:
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        agent={"name": "scraped-agent"},
        middlewares=[
            {"type": "local", "import": "hookmesh.middleware.builtin.metrics:MetricsMiddleware"}
        ],
        metrics_listen="127.0.0.1:0",
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        assert service.server.metrics is not None
        url = f"http://127.0.0.1:{service.server.metrics.port}/metrics"
        async with AgentClient(f"127.0.0.1:{service.port}", timeout=10) as client:
            await client.text("hello")
        page = await asyncio.to_thread(_get, url)
    finally:
        await service.stop(None)
    lines = [line for line in page.splitlines() if 'gen_ai_agent_name="scraped-agent"' in line]
    assert any(
        line.startswith("hookmesh_agent_replies_total{") and line.endswith(" 1.0") for line in lines
    ), lines
    assert "gen_ai_client_operation_duration_seconds_bucket" in page
    # The one model call of the reply was recorded once (a count, never a duration).
    assert any(
        line.startswith("gen_ai_client_operation_duration_seconds_count{") and line.endswith(" 1.0")
        for line in page.splitlines()
    ), page
    with pytest.raises(OSError):
        await asyncio.to_thread(_get, url)


class _Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.got = asyncio.Event()

    async def Export(self, request: Any, context: Any) -> Any:
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                self.names.update(m.name for m in scope.metrics)
        if "gen_ai.client.token.usage" in self.names:
            self.got.set()
        return metrics_service_pb2.ExportMetricsServiceResponse()


_SCRIPT = """
import asyncio
from opentelemetry import metrics
from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel
from hookmesh.metrics import install_meter_provider
from hookmesh.middleware.builtin.metrics import MetricsMiddleware

assert install_meter_provider()

async def main():
    agent = Agent(ScriptedChatModel(["hi"]), middlewares=[MetricsMiddleware()])
    async for _ in agent.reply("go"):
        pass

asyncio.run(main())
metrics.get_meter_provider().shutdown()  # flushes the last export
"""


async def test_metrics_are_exported_over_otlp_when_configured() -> None:
    collector = _Collector()
    server = grpc.aio.server()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _SCRIPT, cwd=ROOT, env=env, stderr=asyncio.subprocess.PIPE
        )
        async with asyncio.timeout(30):
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            await collector.got.wait()
    finally:
        await server.stop(None)
    assert {
        "hookmesh.agent.replies",
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    } <= collector.names
