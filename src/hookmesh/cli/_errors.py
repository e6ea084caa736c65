"""A failed call as the one line the CLI prints and the status it exits with: the only place
the CLI turns a gRPC status into words, each with a way out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from hookmesh.client import AgentClientError

USAGE = 2
"""Exit status of a usage error: a flag's value the command or the server refused."""
FAILURE = 1
"""Exit status of work that failed."""

_WAYS_OUT = {
    "SESSION_NOT_FOUND": "see 'hookmesh sessions list', or start one with --new-session",
    "SESSION_EXISTS": "drop --new-session to continue it",
    "REPLY_NOT_FOUND": "see 'hookmesh sessions list'",
    "SESSION_BUSY": "wait for its reply, or follow it with 'hookmesh chat --attach SESSION'",
    "REPLY_PAUSED": "answer it first: 'hookmesh chat --attach SESSION' asks again",
    "KNOWLEDGE_BASE_NOT_FOUND": "see 'hookmesh kb list', or create it with 'hookmesh kb create'",
    "MEMORY_NOT_FOUND": "see 'hookmesh memory list --user USER'",
    "CREDENTIALS_REQUIRED": "pass a token with --token-env NAME",
    "INVALID_TOKEN": "pass a token the service accepts with --token-env NAME",
    "STORE_UNAVAILABLE": "the service's database is down; try again once it is back",
    "ERASURE_STORE_UNAVAILABLE": "what was erased stays; run the same command again",
    "ERASURE_STORE_REFUSED": "fix the agent's erasure config or its grant there, then run again",
    "EXPORT_STORE_REFUSED": "fix the agent's erasure config or its grant there, then run again",
    "INVALID_CONFIG": "fix the file and reload again (the running middlewares stay)",
}
"""What to do next, by the error's stable reason."""
_ARTICLE = {"agent": "an", "agent admin": "an"}
_SERVICE_OF_CLIENT = {
    "AgentClient": "agent",
    "SyncAgentClient": "agent",
    "AdminClient": "agent admin",
    "RetrievalClient": "retrieval",
    "MemoryClient": "memory",
    "TTSClient": "TTS",
}
_OWN_SERVICES = ("grpc.health.", "grpc.reflection.")
_REFLECTION_TIMEOUT = 3.0


@dataclass(frozen=True)
class Callee:
    """What a command talks to, for the words of its failures."""

    address: str
    """``host:port`` as given to --target."""
    service: str
    """``agent``, ``retrieval``, ``memory``, ``TTS`` or ``agent admin``."""
    timeout: float | None = None
    """The call's deadline in seconds, when it has one."""
    alternative: str = ""
    """Another way out when the service is not there (``use --local``)."""
    tls: Any = None
    """The command's TLS settings (to ask the server which services it has)."""


def service_of(client_class: Any) -> str:
    """The service a client class talks to (``AgentClient`` → ``agent``)."""
    return _SERVICE_OF_CLIENT.get(getattr(client_class, "__name__", ""), "hookmesh")


async def failure_line(exc: AgentClientError, callee: Callee) -> tuple[str, int]:
    """The ``error: …`` line for `exc` and the exit status: 2 when the server refused a value
    the command was given, else 1."""
    code = USAGE if exc.code == grpc.StatusCode.INVALID_ARGUMENT else FAILURE
    return f"error: {await _words(exc, callee)}", code


async def _words(exc: AgentClientError, callee: Callee) -> str:
    address = callee.address
    details = exc.message
    if exc.code == grpc.StatusCode.UNAVAILABLE and not exc.reason:
        other = f", or {callee.alternative}" if callee.alternative else ""
        said = details.lower()
        if "connection refused" in said:
            return (
                f"nothing listens on {address}: start it with 'hookmesh up' or pass --target{other}"
            )
        if "socket closed" in said or "ssl" in said or "handshake" in said:
            return (
                f"{address} closed the connection: is it a hookmesh {callee.service} service, and "
                f"does it want TLS (--tls-ca)? 'hookmesh status --target {address}' checks{other}"
            )
        if "dns" in said or "resolve" in said:
            return f"cannot resolve the host of {address}: check --target{other}"
        return f"{address} is unavailable ({details}): 'hookmesh status' checks{other}"
    if exc.code == grpc.StatusCode.UNIMPLEMENTED and not exc.reason:
        article = _ARTICLE.get(callee.service, "a")
        answers = await _services_at(address, callee.tls)
        if not answers:
            return (
                f"{address} is not {article} {callee.service} service (it does not know the call)"
            )
        return (
            f"{address} is not {article} {callee.service} service (it answers {', '.join(answers)})"
        )
    if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED and not exc.reason:
        within = f" within {callee.timeout:g} s" if callee.timeout else " in time"
        return f"no answer from {address}{within}: raise --timeout, or see 'hookmesh status'"
    line = _with_violations(details, exc)
    way_out = _WAYS_OUT.get(exc.reason)
    if way_out:
        line = f"{line}: {way_out}"
    return f"{line} [{exc.reason}]" if exc.reason else f"{exc.code.name}: {line}"


def _with_violations(message: str, exc: AgentClientError) -> str:
    """The message, with each field violation it does not already say (once, one line)."""
    extra = [f"{v.field}: {v.description}" for v in exc.violations]
    extra = [e for e in extra if e not in message]
    return "; ".join([message, *extra]) if extra else message


async def _services_at(address: str, tls: Any) -> list[str]:
    """The services the server at `address` says it has (its reflection), short names; empty
    when it does not say."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    from hookmesh._security import open_channel

    request = reflection_pb2.ServerReflectionRequest(list_services="")
    try:
        async with open_channel(address, tls) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            call = stub.ServerReflectionInfo(iter([request]), timeout=_REFLECTION_TIMEOUT)
            async for response in call:
                names = [s.name for s in response.list_services_response.service]
                return [n.rpartition(".")[2] for n in names if not n.startswith(_OWN_SERVICES)]
    except grpc.aio.AioRpcError:
        pass
    return []
