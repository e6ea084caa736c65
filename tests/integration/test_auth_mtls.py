"""Who a caller is under mTLS, case by case (test_auth.py has the handshake matrix): the
certificate's common name mapped through `client_principals`, an unlisted name as its own
principal, a token that wins over the certificate, and a wrong token that never falls back
to it. The memory service shows who the caller is: it reads only its own user's memories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh._security import ClientTLS, open_channel
from hookmesh.errors import reason_of, status_of
from hookmesh.server._auth import Caller
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.v1 import memory_pb2, memory_pb2_grpc
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def files(tmp_path: Path, pki: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", "bob:tok-bob")
    for name, pem in pki.items():
        (tmp_path / f"{name}.pem").write_bytes(pem)
    return tmp_path


async def _memory(files: Path, **auth: Any) -> Any:
    tls = {
        "cert": str(files / "server_cert.pem"),
        "key": str(files / "server_key.pem"),
        "client_ca": str(files / "ca.pem"),
    }
    config = load_memory_config(
        None, store=f"sqlite:///{files}/memory.db", auth={"tls": tls, **auth}
    )
    return await start_memory_service(config, address="127.0.0.1:0")


@pytest.fixture
async def channel(files: Path) -> AsyncIterator[Any]:
    """Opens an mTLS channel (the client certificate's CN is ``agent``) to a memory service
    started with the given auth settings."""
    running: list[Any] = []
    channels: list[grpc.aio.Channel] = []

    async def open_one(**auth: Any) -> grpc.aio.Channel:
        service = await _memory(files, **auth)
        running.append(service)
        tls = ClientTLS(files / "ca.pem", files / "client_cert.pem", files / "client_key.pem")
        opened = open_channel(f"127.0.0.1:{service.port}", tls)
        channels.append(opened)
        return opened

    try:
        yield open_one
    finally:
        for opened in channels:
            await opened.close()
        for service in running:
            await service.stop(None)


async def _outcome(channel: grpc.aio.Channel, user: str, token: str = "") -> tuple[str, str]:
    """Code and reason of listing `user`'s memories ("OK" when allowed)."""
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    request = memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(user_id=user))
    try:
        await stub.ListMemories(request, timeout=SHORT_TIMEOUT, metadata=metadata)
    except grpc.aio.AioRpcError as exc:
        status = status_of(exc)
        return exc.code().name, reason_of(status) if status else ""
    return "OK", ""


DENIED = ("PERMISSION_DENIED", "USER_NOT_ALLOWED")


async def test_the_certificate_names_the_principal_through_the_map(channel: Any) -> None:
    opened = await channel(client_principals={"agent": "alice"})
    assert await _outcome(opened, "alice") == ("OK", "")
    assert await _outcome(opened, "agent") == DENIED


async def test_an_unlisted_common_name_is_its_own_principal(channel: Any) -> None:
    opened = await channel(client_principals={"someone-else": "alice"})
    assert await _outcome(opened, "agent") == ("OK", "")
    assert await _outcome(opened, "alice") == DENIED


async def test_a_token_wins_over_the_certificate(channel: Any) -> None:
    opened = await channel(token_env="HOOKMESH_TEST_TOKENS")
    assert await _outcome(opened, "bob", token="tok-bob") == ("OK", "")
    assert await _outcome(opened, "agent", token="tok-bob") == DENIED
    assert await _outcome(opened, "agent") == ("OK", "")  # no token: the certificate


async def test_a_wrong_token_never_falls_back_to_the_certificate(channel: Any) -> None:
    opened = await channel(token_env="HOOKMESH_TEST_TOKENS")
    assert await _outcome(opened, "agent", token="nope") == ("UNAUTHENTICATED", "INVALID_TOKEN")


def test_a_caller_cannot_be_changed_once_authenticated() -> None:
    caller = Caller("alice", "alice")
    assert caller.trusted is False
    with pytest.raises(AttributeError):
        caller.user = "bob"  # type: ignore[misc]
