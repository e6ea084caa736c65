"""The Go SDK's programs (clients/go), built with Debian's Go toolchain in GOPATH mode (no
module proxy): a GOPATH of their own whose import path links to this checkout's
clients/go, the system's /usr/share/gocode second."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from hookmesh.testing import ServerProcess
from tests.sdk_sidecars import listening

GO_DIR = Path(__file__).resolve().parents[1] / "clients" / "go"
IMPORT_PATH = "github.com/hookmesh/hookmesh/clients/go"
SYSTEM_GOPATH = "/usr/share/gocode"
BUILD_TIMEOUT = 240.0
HAVE_GO_PACKAGES = Path(SYSTEM_GOPATH, "src/google.golang.org/grpc").is_dir()


def go_env(gopath: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{gopath}:{SYSTEM_GOPATH}",
        "GOCACHE": str(gopath / "cache"),
        "GOPROXY": "off",
        "GOFLAGS": "",
    }


async def go(gopath: Path, *args: str) -> str:
    """Run `go ARGS` on clients/go (linked at its import path in `gopath`); its output, the
    test failing unless it exits 0."""
    binary = shutil.which("go")
    if binary is None or not HAVE_GO_PACKAGES:
        pytest.fail("Go and Debian's Go packages are needed: run `make go`")
    link = gopath / "src" / IMPORT_PATH
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(GO_DIR)
    process = await asyncio.create_subprocess_exec(
        binary, *args,
        env=go_env(gopath), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(BUILD_TIMEOUT):
        output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    return output.decode()


async def build(gopath: Path, package: str, out: Path) -> Path:
    """`go build` one package of clients/go (e.g. ``examples/audit``) into `out`."""
    await go(gopath, "build", "-o", str(out), f"{IMPORT_PATH}/{package}")
    return out


@asynccontextmanager
async def go_sidecar(
    binary: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    """Run a Go sidecar on 127.0.0.1:0 until the block ends; its stdout is readable."""
    async with listening(str(binary), *args, env=env) as sidecar:
        yield sidecar
