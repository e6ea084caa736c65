"""Every user mistake gets one line on stderr and a meaningful exit status, never a traceback."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.commands import run

pytestmark = pytest.mark.timeout(120)

USAGE, FAILURE = 2, 1


def one_line(err: str) -> str:
    """The single ``error: …`` line a mistake prints (fails on anything more)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another process (this one) listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def agent_config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(f"listen: 127.0.0.1:0\nstore: sqlite:///{tmp_path}/agent.db\n{extra}")
    return path


async def test_a_port_in_use_is_refused(busy_port: int) -> None:
    code, _, err = await run("serve", "retrieval", "--listen", f"127.0.0.1:{busy_port}")
    assert code == FAILURE
    assert one_line(err) == (
        f"error: cannot start the retrieval service: address 127.0.0.1:{busy_port} is already "
        "in use"
    )


async def test_an_unreachable_sidecar_at_start(tmp_path: Path, busy_port: int) -> None:
    config = agent_config(
        tmp_path,
        f"middlewares: [{{type: remote, target: '127.0.0.1:{busy_port}', timeout: 1}}]\n",
    )
    code, _, err = await run("serve", "agent", "--config", str(config))
    assert code == FAILURE
    line = one_line(err)
    assert line.startswith("error: cannot start the agent service:") and str(busy_port) in line


async def test_a_module_that_does_not_import_and_app_dir(tmp_path: Path) -> None:
    config = agent_config(tmp_path, "tools: ['my_tools:lookup']\n")
    code, _, err = await run("serve", "agent", "--config", str(config))
    assert code == FAILURE
    assert "cannot load 'my_tools:lookup': No module named 'my_tools'" in one_line(err)

    app = tmp_path / "app"
    app.mkdir()
    (app / "my_tools.py").write_text(
        'def lookup(key: str) -> str:\n    """Look it up."""\n    return key\n'
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "serve", "agent", "--config", str(config),
        "--app-dir", str(app),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("agent service listening on 127.0.0.1:"), line
    finally:
        process.terminate()
        async with asyncio.timeout(60):
            await process.wait()


async def test_a_middleware_with_a_sync_hook_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "bad_mw.py").write_text(
        "from hookmesh.middleware import Middleware\n\n"
        "class Loud(Middleware):\n"
        "    def on_system_prompt(self, agent, prompt):\n"
        "        return prompt.upper()\n"
    )
    config = agent_config(tmp_path, "middlewares: [{type: local, import: 'bad_mw:Loud'}]\n")
    code, _, err = await run("serve", "agent", "--config", str(config), "--app-dir", str(tmp_path))
    assert code == FAILURE
    line = one_line(err)
    assert "middleware Loud" in line and "on_system_prompt must be 'async def'" in line


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (("say", "hi", "-o", "no/such/folder/hi.wav"), {}, "folder no/such/folder does not exist"),
        (("status",), {"HOOKMESH_LOG_LEVEL": "verbose"}, "HOOKMESH_LOG_LEVEL='verbose'"),
        (("chat", ""), {}, "give the message to send"),
        (("chat", "hi", "--max-iters", "-3"), {}, "--max-iters must be between 0 and 1000"),
        (("chat", "hi", "--target", "nowhere"), {}, "--target 'nowhere' is not host:port"),
        (("chat", "hi", "--token-env", "HOOKMESH_NO_SUCH_VAR"), {}, "HOOKMESH_NO_SUCH_VAR"),
        (("serve", "agent", "--config", "missing.yaml"), {}, "cannot read config missing.yaml"),
        (("sessions", "list", "--page-sise", "3"), {}, "No such option: --page-sise"),
        (("up", "--listen", "7000"), {}, "--listen '7000' is not host:port"),
        (("serve", "mcp", "--token-env", "HOOKMESH_NO_SUCH_VAR"), {}, "HOOKMESH_NO_SUCH_VAR"),
        (
            ("serve", "mcp", "--transport", "http", "--token-env", "HOME"),
            {},
            "--token-env is for stdio",
        ),
    ],
)
async def test_usage_mistakes(args: tuple[str, ...], env: dict[str, str], expected: str) -> None:
    code, _, err = await run(*args, env=env)
    assert code == USAGE
    assert expected in one_line(err)


async def test_a_bad_config_key_is_named(tmp_path: Path) -> None:
    config = agent_config(tmp_path, "agent: {kind: threaded}\n")
    code, _, err = await run("up", "--config", str(config))
    assert code == USAGE
    assert "agent.kind" in one_line(err)


@pytest.mark.parametrize(
    "command",
    [("sessions", "list"), ("memory", "list", "--user", "alice"), ("admin", "reload")],
)
async def test_a_service_that_never_answers(busy_port: int, command: tuple[str, ...]) -> None:
    target = f"127.0.0.1:{busy_port}"
    code, _, err = await run(*command, "--target", target, "--timeout", "1")
    assert code == FAILURE
    assert one_line(err) == f"error: no answer from {target} within 1 s"
