"""Trace context flows client → agent service → sidecar (and the sidecar's spans join it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from hookmesh.client import AgentClient
from hookmesh.remote import serve_middleware
from hookmesh.services.agent import load_config, start_agent_service
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)


async def test_one_trace_spans_client_agent_and_sidecar(tmp_path: Path, span_exporter: Any) -> None:
    sidecar = await serve_middleware(mws.CallCounter())
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        middlewares=[{"type": "remote", "target": f"127.0.0.1:{sidecar.port}"}],
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    span_exporter.clear()
    try:
        tracer = trace.get_tracer("test")
        with tracer.start_as_current_span("user request") as root:
            async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
                assert await client.text("hi") == "Hello from hookmesh."
        trace_id = root.get_span_context().trace_id
    finally:
        await service.stop(None)
        await sidecar.stop(None)
    spans = {(s.name, s.kind): s for s in span_exporter.get_finished_spans()}
    name = "/hookmesh.v1.AgentService/Reply"
    client_call = spans[name, trace.SpanKind.CLIENT]
    reply = spans[name, trace.SpanKind.SERVER]
    model_call = spans["middleware CallCounter on_model_call", trace.SpanKind.SERVER]
    reporting = spans["middleware CallCounter on_reply", trace.SpanKind.SERVER]
    assert reply.parent is not None and reply.parent.span_id == client_call.context.span_id
    for span in (client_call, reply, model_call, reporting):
        assert span.context.trace_id == trace_id, span.name
    # The sidecar's spans are children of the agent service's Reply span.
    assert model_call.parent is not None and reporting.parent is not None
    assert reporting.parent.span_id == reply.context.span_id
