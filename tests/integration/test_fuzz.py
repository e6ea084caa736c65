"""Every RPC of every service, fed inputs generated from its request descriptor: no call ends
with UNKNOWN or INTERNAL (those mean a bug), and every server still answers afterwards."""

from __future__ import annotations

import asyncio
import math
import pathlib
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import descriptor as d
from google.protobuf import duration_pb2, message_factory, struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Mount, Route

from hookmesh.client import AgentClientError
from hookmesh.remote import serve_middleware
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.services.tts import load_tts_config, start_tts_service
from hookmesh.v1 import agent_pb2, memory_pb2, middleware_pb2, retrieval_pb2, tts_pb2
from tests import middlewares as mws
from tests.gateways import headers_for, valid_body
from tests.json_strategies import bodies
from tests.proto_strategies import (
    Path,
    bad_structs,
    bad_timestamps,
    messages,
    paths_to,
    planted,
)

pytestmark = pytest.mark.timeout(300)

CALL_TIMEOUT = 20.0
EXAMPLES = 12
BUGS = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
_FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""How each generated check runs: few examples, the same ones every run."""
_A2A: list[Any] = []
"""The A2A server `servers` started (its HTTP side is fuzzed with the other gateways)."""


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
def loop() -> Iterator[_Loop]:
    running = _Loop()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, loop: _Loop) -> Iterator[dict[str, str]]:
    """Each service on 127.0.0.1:0, by full service name → address."""
    data: pathlib.Path = tmp_path_factory.mktemp("fuzz")
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
    a2a = loop.run(
        start_a2a_server(
            load_a2a_config(None, agent=f"127.0.0.1:{agent.port}", run_timeout=CALL_TIMEOUT / 2),
            address="127.0.0.1:0",
            grpc_address="127.0.0.1:0",
        )
    )
    _A2A[:] = [a2a]
    running = [a2a, agent, retrieval, memory, tts, sidecar]
    try:
        yield {
            "hookmesh.v1.AgentService": f"127.0.0.1:{agent.port}",
            "hookmesh.v1.RetrievalService": f"127.0.0.1:{retrieval.port}",
            "hookmesh.v1.MemoryService": f"127.0.0.1:{memory.port}",
            "hookmesh.v1.TTSService": f"127.0.0.1:{tts.port}",
            "hookmesh.v1.MiddlewareService": f"127.0.0.1:{sidecar.port}",
            "lf.a2a.v1.A2AService": f"127.0.0.1:{a2a.grpc_port}",
        }
    finally:
        for server in running:
            loop.run(server.stop(None))


def _methods() -> list[d.MethodDescriptor]:
    files = (agent_pb2, retrieval_pb2, memory_pb2, tts_pb2, middleware_pb2, a2a_pb2)
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

    @_FUZZ
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


def _bad_values(full_name: str) -> list[Any]:
    if full_name == "google.protobuf.Struct":
        return bad_structs()
    if full_name == "google.protobuf.Value":
        return [struct_pb2.Value(number_value=n) for n in (math.nan, math.inf, -math.inf)]
    if full_name == "google.protobuf.Timestamp":
        return bad_timestamps()
    return [duration_pb2.Duration(seconds=1, nanos=-1), duration_pb2.Duration(seconds=2**62)]


_PLANTED = [
    (method, path, value)
    for method in _methods()
    for kind in (
        "google.protobuf.Struct",
        "google.protobuf.Value",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
    )
    for path in paths_to(method.input_type, kind)
    for value in _bad_values(kind)
]


@pytest.mark.parametrize(
    ("method", "path", "value"),
    _PLANTED,
    ids=[
        f"{m.containing_service.name}.{m.name}:{'.'.join(f.name for f in p)}:{i}"
        for i, (m, p, _) in enumerate(_PLANTED)
    ],
)
def test_a_value_json_or_rfc_3339_cannot_hold_is_never_a_bug_status(
    servers: dict[str, str], method: d.MethodDescriptor, path: Path, value: Any
) -> None:
    """NaN and infinities in every field that carries a Struct or Value, and out-of-range
    Timestamps and Durations wherever a request holds one, planted one at a time (random
    generation rarely reaches a field six levels down)."""
    request = planted(method.input_type, path, value)
    address = servers[method.containing_service.full_name]
    with grpc.insecure_channel(address) as channel:
        try:
            _call(channel, method, [request])
        except grpc.RpcError as exc:
            assert exc.code() not in BUGS, f"{exc.code()}: {exc.details()}"  # type: ignore[attr-defined]


_FIRST: dict[str, Any] = {
    "hookmesh.v1.RetrievalService.Ingest": retrieval_pb2.IngestRequest(
        knowledge_base="fuzz", document=retrieval_pb2.Document(id="a", text="a")
    ),
    "hookmesh.v1.TTSService.SynthesizeStream": tts_pb2.SynthesizeStreamRequest(
        config=tts_pb2.SpeechConfig()
    ),
    "hookmesh.v1.MiddlewareService.Intercept": middleware_pb2.InterceptRequest(
        invocation_id="none", cancel=middleware_pb2.CancelInvocation()
    ),
}
"""A message each client stream reads on after, so the bad one after it is reached."""
_UNDECODABLE = [
    (method, after)
    for method in _methods()
    for after in ((False, True) if method.client_streaming else (False,))
]


@pytest.mark.parametrize(
    ("method", "after_a_good_one"),
    _UNDECODABLE,
    ids=[
        f"{m.containing_service.name}.{m.name}{'-second' if after else ''}"
        for m, after in _UNDECODABLE
    ],
)
def test_a_message_that_does_not_decode_is_invalid_argument(
    servers: dict[str, str], method: d.MethodDescriptor, after_a_good_one: bool
) -> None:
    """Bytes that are not the request's wire format, alone or after a good message in a
    client stream: INVALID_ARGUMENT, never the library's INTERNAL or a clean close."""
    address = servers[method.containing_service.full_name]
    path = f"/{method.containing_service.full_name}/{method.name}"
    raw = [b"\xff\xff\xff"]
    if after_a_good_one:
        raw.insert(0, _FIRST[method.full_name].SerializeToString())
    with grpc.insecure_channel(address) as channel:
        if after_a_good_one and method.full_name.startswith("hookmesh.v1.Retrieval"):
            channel.unary_unary(
                "/hookmesh.v1.RetrievalService/CreateKnowledgeBase",
                retrieval_pb2.CreateKnowledgeBaseRequest.SerializeToString,
                retrieval_pb2.CreateKnowledgeBaseResponse.FromString,
            )(retrieval_pb2.CreateKnowledgeBaseRequest(name="fuzz"), timeout=CALL_TIMEOUT)
        with pytest.raises(grpc.RpcError) as refused:
            if (method.client_streaming, method.server_streaming) == (False, False):
                channel.unary_unary(path)(raw[0], timeout=CALL_TIMEOUT)
            elif not method.client_streaming:
                list(channel.unary_stream(path)(raw[0], timeout=CALL_TIMEOUT))
            elif not method.server_streaming:
                channel.stream_unary(path)(iter(raw), timeout=CALL_TIMEOUT)
            else:
                list(channel.stream_stream(path)(iter(raw), timeout=CALL_TIMEOUT))
    error = AgentClientError.from_rpc_error(refused.value)  # type: ignore[arg-type]
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT, error.message
    assert error.reason == "UNDECODABLE_REQUEST"


# --- the HTTP gateways ---------------------------------------------------------------------------


@dataclass
class _Door:
    """A gateway: its base URL and its routes (method, path template)."""

    url: str
    routes: list[tuple[str, str]]


def _routes(routes: Sequence[Any], prefix: str = "") -> list[tuple[str, str]]:
    """Every (method, path) a Starlette app serves, mounts included (HEAD is GET's twin)."""
    out = []
    for route in routes:
        if isinstance(route, Mount):
            out += _routes(route.routes, prefix + route.path)
        elif isinstance(route, Route):
            out += [(m, prefix + route.path) for m in sorted(route.methods or ()) if m != "HEAD"]
    return out


@pytest.fixture(scope="module")
def doors(loop: _Loop, servers: dict[str, str]) -> Iterator[dict[str, _Door]]:
    """The AG-UI and MCP gateways beside the A2A server's HTTP side, by name."""
    agent = servers["hookmesh.v1.AgentService"]
    agui = loop.run(start_agui_gateway(load_agui_config(None, agent=agent), address="127.0.0.1:0"))
    mcp = loop.run(
        start_mcp_http_server(
            load_mcp_settings(
                None,
                transport="http",
                retrieval=servers["hookmesh.v1.RetrievalService"],
                memory=servers["hookmesh.v1.MemoryService"],
                tts=servers["hookmesh.v1.TTSService"],
            ),
            address="127.0.0.1:0",
        )
    )
    a2a = _A2A[0]
    mcp_routes = [("GET", "/healthz"), ("GET", "/mcp"), ("POST", "/mcp"), ("DELETE", "/mcp")]
    try:
        yield {
            "agui": _Door(f"http://127.0.0.1:{agui.port}", _routes(agui.app.routes)),
            "a2a": _Door(f"http://127.0.0.1:{a2a.port}", _routes(a2a.app.routes)),
            "mcp": _Door(f"http://127.0.0.1:{mcp.port}", mcp_routes),
        }
    finally:
        loop.run(mcp.stop(None))
        loop.run(agui.stop(None))


_MESSAGE = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hello"}]}
_VALID: dict[tuple[str, str], list[Any]] = {
    ("agui", "/agui"): [valid_body("agui")],
    ("a2a", "/"): [
        valid_body("a2a"),
        *(
            {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"id": "t"}}
            for method in ("tasks/get", "tasks/cancel", "GetTask", "CancelTask", "ListTasks")
        ),
        {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": _MESSAGE}},
    ],
    ("a2a", "/v1/message:send"): [{"message": _MESSAGE}],
    ("a2a", "/v1/message:stream"): [{"message": _MESSAGE}],
    ("mcp", "/mcp"): [
        valid_body("mcp"),
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search_knowledge", "arguments": {"query": "x"}},
        },
    ],
}
"""Valid bodies per JSON route, the seeds of wrong-type mutations; other routes get {}."""
_PATH_VALUES = st.sampled_from(["t", "", "..", "%00", "%ff", "x" * 300, "%2F", "😀", "-1"])


def _fill(path: str, draw: st.DrawFn) -> str:
    """`path` with each {param} replaced by a drawn value."""
    parts = path.split("{")
    out = parts[0]
    for part in parts[1:]:
        _, _, rest = part.partition("}")
        out += draw(_PATH_VALUES) + rest
    return out


def _fuzz_route(
    http: httpx.Client, name: str, method: str, path: str, session: dict[str, str]
) -> None:
    """One route of gateway `name`, fed generated path values and bodies: never a 5xx."""
    seeds = _VALID.get((name, path), [{}])
    headers = {"content-type": "application/json", **headers_for(name), **session}

    @_FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        target = _fill(path, data.draw)
        body = data.draw(bodies(seeds)) if method in ("POST", "DELETE") else b""
        # The status is all we judge: a stream (a run, an MCP event stream) is not read.
        with http.stream(method, target, content=body, headers=headers) as answer:
            assert answer.status_code < 500, f"{method} {target}: {answer.status_code}"

    check()


@pytest.mark.parametrize("name", ["agui", "a2a", "mcp"])
def test_no_http_request_makes_a_gateway_fail_with_a_server_error(
    doors: dict[str, _Door], name: str
) -> None:
    """Every route of every gateway, fed malformed JSON, deep nesting, bad UTF-8, huge
    values and valid bodies with a value of the wrong type: never a 5xx, and the gateway
    still answers afterwards."""
    door = doors[name]
    session: dict[str, str] = {}
    with httpx.Client(base_url=door.url, timeout=CALL_TIMEOUT) as http:
        if name == "mcp":
            opened = http.post("/mcp", json=valid_body("mcp"), headers=headers_for("mcp"))
            session["mcp-session-id"] = opened.headers["mcp-session-id"]
        for method, path in door.routes:
            _fuzz_route(http, name, method, path, session)
        assert http.get("/healthz").status_code == 200
