"""Every RPC of every service, fed inputs generated from its request descriptor: no call ends
with UNKNOWN or INTERNAL (those mean a bug), and every server still answers afterwards."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as d
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookmesh.remote import serve_middleware
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.services.tts import load_tts_config, start_tts_service
from hookmesh.v1 import agent_pb2, memory_pb2, middleware_pb2, retrieval_pb2, tts_pb2
from tests import middlewares as mws
from tests.proto_strategies import messages

pytestmark = pytest.mark.timeout(300)

CALL_TIMEOUT = 20.0
EXAMPLES = 12
BUGS = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


class _Loop:
    """An event loop in its own thread, where the servers run while the test calls them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each service on 127.0.0.1:0, by full service name → address."""
    data: Path = tmp_path_factory.mktemp("fuzz")
    loop = _Loop()
    agent = loop.run(
        start_agent_service(
            load_config(
                None, store=f"sqlite:///{data}/agent.db", tools=["tests.agent_helpers:echo"]
            ),
            address="127.0.0.1:0",
        )
    )
    retrieval = loop.run(
        start_retrieval_service(
            load_retrieval_config(None, store=f"sqlite:///{data}/retrieval.db"),
            address="127.0.0.1:0",
        )
    )
    memory = loop.run(
        start_memory_service(
            load_memory_config(None, store=f"sqlite:///{data}/memory.db"), address="127.0.0.1:0"
        )
    )
    tts = loop.run(start_tts_service(load_tts_config(None), address="127.0.0.1:0"))
    sidecar = loop.run(serve_middleware(mws.ToolGiver()))
    running = [agent, retrieval, memory, tts, sidecar]
    try:
        yield {
            "hookmesh.v1.AgentService": f"127.0.0.1:{agent.port}",
            "hookmesh.v1.RetrievalService": f"127.0.0.1:{retrieval.port}",
            "hookmesh.v1.MemoryService": f"127.0.0.1:{memory.port}",
            "hookmesh.v1.TTSService": f"127.0.0.1:{tts.port}",
            "hookmesh.v1.MiddlewareService": f"127.0.0.1:{sidecar.port}",
        }
    finally:
        for server in running:
            loop.run(server.stop(None))
        loop.close()


def _methods() -> list[d.MethodDescriptor]:
    files = (agent_pb2, retrieval_pb2, memory_pb2, tts_pb2, middleware_pb2)
    return [
        method
        for module in files
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]


def _call(channel: grpc.Channel, method: d.MethodDescriptor, requests: list[Any]) -> None:
    """Send `requests` (one for unary requests), read every response; raise the RPC error."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    kinds = (method.client_streaming, method.server_streaming)
    serialize = type(requests[0]).SerializeToString
    from google.protobuf import message_factory

    deserialize = message_factory.GetMessageClass(method.output_type).FromString
    if kinds == (False, False):
        channel.unary_unary(path, serialize, deserialize)(requests[0], timeout=CALL_TIMEOUT)
    elif kinds == (False, True):
        list(channel.unary_stream(path, serialize, deserialize)(requests[0], timeout=CALL_TIMEOUT))
    elif kinds == (True, False):
        channel.stream_unary(path, serialize, deserialize)(iter(requests), timeout=CALL_TIMEOUT)
    else:
        list(
            channel.stream_stream(path, serialize, deserialize)(
                iter(requests), timeout=CALL_TIMEOUT
            )
        )


@pytest.mark.parametrize(
    "method", _methods(), ids=lambda m: f"{m.containing_service.name}.{m.name}"
)
def test_no_input_makes_a_service_fail_with_a_bug_status(
    servers: dict[str, str], method: d.MethodDescriptor
) -> None:
    address = servers[method.containing_service.full_name]
    count = st.integers(1, 3) if method.client_streaming else st.just(1)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        requests = data.draw(st.lists(messages(method.input_type), min_size=1, max_size=3))
        requests = requests[: data.draw(count)]
        with grpc.insecure_channel(address) as channel:
            try:
                _call(channel, method, requests)
            except grpc.RpcError as exc:
                assert exc.code() not in BUGS, f"{exc.code()}: {exc.details()}"  # type: ignore[attr-defined]

    check()
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT
        )
    assert health.status == health_pb2.HealthCheckResponse.SERVING
