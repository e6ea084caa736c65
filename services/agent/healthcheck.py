#!/usr/bin/env python3
"""The image's HEALTHCHECK: does the hookmesh server that runs as the container's first
process serve?

One image runs every service, so nothing is configured per service: the address comes from
that process's own command line (``--listen``, else its config file and ``HOOKMESH_*``
variables, resolved by the service's own loader, else the default), and the question is the
one Kubernetes asks too: gRPC health for the gRPC services and sidecars, ``GET /healthz`` for
the HTTP gateways. Exit 0 when serving, 1 when not. A port with TLS needs the orchestrator's
own probe (this check speaks plaintext, like the loopback it calls).
"""

from __future__ import annotations

import importlib
import sys
import urllib.request
from pathlib import Path

_TIMEOUT = 3.0
_GATEWAYS = ("agui", "a2a", "mcp")
_LOADERS = {
    "agent": ("hookmesh.services.agent", "load_config"),
    "retrieval": ("hookmesh.services.retrieval", "load_retrieval_config"),
    "memory": ("hookmesh.services.memory", "load_memory_config"),
    "tts": ("hookmesh.services.tts", "load_tts_config"),
    "agui": ("hookmesh.services.agui", "load_agui_config"),
    "a2a": ("hookmesh.services.a2a", "load_a2a_config"),
    "mcp": ("hookmesh.services.mcp", "load_mcp_settings"),
}
_SIDECAR_LISTEN = "127.0.0.1:7001"


def _command(pid: int = 1) -> list[str]:
    """The arguments after ``hookmesh`` in the process's command line."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
    for index, arg in enumerate(args):
        if Path(arg).name == "hookmesh":
            return args[index + 1 :]
    raise SystemExit(f"process {pid} is not hookmesh: {' '.join(args)}")


def _option(args: list[str], *names: str) -> str | None:
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(f"{name}="):
                return arg.split("=", 1)[1]
    return None


def _listen(args: list[str]) -> tuple[str, str | None]:
    """The server's kind and the address it listens on (None: it does not listen)."""
    if args[:1] == ["sidecar"]:
        return "sidecar", _option(args, "--listen") or _SIDECAR_LISTEN
    if args[:1] != ["serve"] or len(args) < 2 or args[1] not in _LOADERS:
        raise SystemExit(f"not a hookmesh server: hookmesh {' '.join(args)}")
    kind, listen = args[1], _option(args, "--listen")
    if listen is None or kind == "mcp":
        module, loader = _LOADERS[kind]
        config = _option(args, "--config", "-c")
        overrides = {"listen": listen} if listen else {}
        settings = getattr(importlib.import_module(module), loader)(
            Path(config) if config else None, **overrides
        )
        if kind == "mcp" and (_option(args, "--transport") or settings.transport) != "http":
            return kind, None  # MCP over stdio: its client is its only caller
        listen = settings.listen
    return kind, listen


def _local(listen: str) -> str:
    """Where to call a server bound to `listen` from inside its container."""
    if listen.startswith("unix:"):
        return listen
    host, _, port = listen.rpartition(":")
    host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)
    return f"{host}:{port}"


def _grpc_serving(target: str) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=_TIMEOUT
        )
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def _http_serving(target: str) -> bool:
    with urllib.request.urlopen(f"http://{target}/healthz", timeout=_TIMEOUT) as answer:
        return bool(answer.status == 200)


def main() -> int:
    """Check once; print what was asked and the answer."""
    kind, listen = _listen(_command())
    if listen is None:
        print(f"{kind}: listens on no port")
        return 0
    target = _local(listen)
    try:
        serving = (_http_serving if kind in _GATEWAYS else _grpc_serving)(target)
    except Exception as exc:  # any failure to answer is "not serving", with its reason
        print(f"{kind} at {target}: {type(exc).__name__}: {exc}")
        return 1
    print(f"{kind} at {target}: {'serving' if serving else 'not serving'}")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
