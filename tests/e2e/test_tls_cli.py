"""The command line over TLS with a token: `hookmesh serve agent` with the auth flags, and
both chat CLIs (Python and Node) as clients."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.e2e.commands import DEADLINE, run
from tests.node_process import NODE_DIR, node_binary

pytestmark = pytest.mark.timeout(120)


async def test_serve_and_chat_over_tls_with_a_token(tmp_path: Path, pki: dict[str, bytes]) -> None:
    for name, pem in pki.items():
        (tmp_path / f"{name}.pem").write_bytes(pem)
    env = {"AGENT_TOKENS": "alice:s3cret", "ALICE_TOKEN": "s3cret", "WRONG": "guess"}
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "serve", "agent", "--listen", "127.0.0.1:0",
        "--token-env", "AGENT_TOKENS",
        "--tls-cert", str(tmp_path / "server_cert.pem"),
        "--tls-key", str(tmp_path / "server_key.pem"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        env={**os.environ, **env, "HOOKMESH_STORE": f"sqlite:///{tmp_path}/agent.db"},
    )  # fmt: skip
    assert server.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            line = (await server.stdout.readline()).decode()
        address = line.split()[-1]
        tls = ("--target", address, "--tls-ca", str(tmp_path / "ca.pem"))
        code, out, err = await run("chat", *tls, "--token-env", "ALICE_TOKEN", "hi", env=env)
        assert code == 0 and "end: completed" in out, err
        code, _, err = await run("chat", *tls, "--token-env", "WRONG", "hi", env=env)
        assert (code, err) == (
            1,
            "error: the bearer token is not valid: pass a token the service accepts with "
            "--token-env NAME [INVALID_TOKEN]\n",
        )
        code, _, err = await run("chat", "--target", address, "--token-env", "ALICE_TOKEN", "hi",
                                 env=env)  # fmt: skip
        assert (code, err) == (  # plaintext against TLS
            1,
            f"error: {address} closed the connection: is it a hookmesh agent service, and does "
            f"it want TLS (--tls-ca)? 'hookmesh status --target {address}' checks\n",
        )

        process = await asyncio.create_subprocess_exec(
            node_binary(), str(NODE_DIR / "chat.js"), *tls, "--token-env", "ALICE_TOKEN", "hi",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **env},
        )  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            node_out, node_err = await process.communicate()
        assert process.returncode == 0, node_err.decode()
        assert "end: completed" in node_out.decode()
    finally:
        server.terminate()
        async with asyncio.timeout(DEADLINE):
            await server.wait()
