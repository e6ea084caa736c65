"""hookmesh's images run as containers for the tests: on the host's network only (Docker here
has no bridge; every server binds 127.0.0.1 at a free port), stopped as production stops them
(SIGTERM), their logs kept for the assertion that failed.

The images are the ones `make image` builds, tagged ``$HOOKMESH_IMAGE_TAG`` (default latest).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

DEADLINE = 120.0
"""Seconds a container may take to be healthy, and a docker command to answer."""
SLOW = 180.0
"""Seconds a hookmesh command against the containers may take: ingesting docs/ embeds it all,
on a machine whose cores the containers share."""
TAG = os.environ.get("HOOKMESH_IMAGE_TAG", "latest")
HOOKMESH = f"hookmesh:{TAG}"
ENVOY = f"hookmesh-envoy:{TAG}"
POSTGRES = f"hookmesh-postgres:{TAG}"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def docker(*args: str, timeout: float = DEADLINE, stdin: bytes = b"") -> str:
    """The output of ``docker ARGS`` (stderr included); fails the test when it fails."""
    process = await asyncio.create_subprocess_exec(
        "docker", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(timeout):
        out, _ = await process.communicate(stdin)
    assert process.returncode == 0, f"docker {' '.join(args)}: {out.decode()}"
    return out.decode()


@dataclass
class Container:
    """A running container, by name."""

    name: str

    async def logs(self) -> str:
        """Everything it wrote, stdout and stderr."""
        return await docker("logs", self.name)

    async def state(self) -> tuple[str, str, int]:
        """Its status (running, exited, …), health (healthy, starting, …) and exit code."""
        out = await docker(
            "inspect", "--format",
            "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}} "
            "{{.State.ExitCode}}", self.name,
        )  # fmt: skip
        status, health, code = out.split()
        return status, health, int(code)

    async def healthy(self, timeout: float = DEADLINE) -> None:
        """Wait (bounded) until the image's HEALTHCHECK passes; fails with the logs if the
        container exits first."""
        # NOTE(tests): Docker announces health only through inspect, so this polls it.
        async with asyncio.timeout(timeout):
            while True:
                status, health, code = await self.state()
                assert status == "running", f"{self.name} {status} ({code}):\n{await self.logs()}"
                if health == "healthy":
                    return
                await asyncio.sleep(0.2)

    async def stop(self) -> int:
        """SIGTERM, then its exit code (Docker sends SIGKILL after 20 s)."""
        await docker("stop", "--time", "20", self.name)
        return (await self.state())[2]


@asynccontextmanager
async def running(
    image: str,
    *args: str,
    env: dict[str, str] | None = None,
    volumes: Sequence[str] = (),
    entrypoint: str | None = None,
) -> AsyncIterator[Container]:
    """``docker run IMAGE ARGS`` on the host's network until the block ends; then it is
    stopped (if still running) and removed. Health is checked every 2 s (the image says 10 s:
    the tests do not wait for it)."""
    name = f"hookmesh-test-{secrets.token_hex(4)}"
    options = ["--network", "host", "--health-interval", "2s", "--name", name]
    for key, value in (env or {}).items():
        options += ["--env", f"{key}={value}"]
    for volume in volumes:
        options += ["--volume", volume]
    if entrypoint is not None:
        options += ["--entrypoint", entrypoint]
    await docker("run", "--detach", *options, image, *args)
    container = Container(name)
    try:
        yield container
    finally:
        await docker("rm", "--force", "--volumes", name)
