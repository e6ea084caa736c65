"""An MCP server written with the official SDK, for the MCP tools tests.

``python tests/mcp_server.py stdio`` serves over stdin/stdout; ``python tests/mcp_server.py
http`` serves streamable HTTP on a free loopback port and prints ``port N`` first. Tools that
change things write a line to the file named by MCP_TEST_LOG, so tests see what really ran.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import subprocess
import sys

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Audio, Context, Image
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, EmbeddedResource, TextContent, ToolAnnotations

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPgPAAEDAQAIicLsAAAAAElFTkSuQmCC"
)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28)

mcp = MCPServer("hookmesh-test")


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file for good."""
    _log(f"deleted {path}")
    return f"deleted {path}"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def add_note(text: str) -> str:
    """Add a note (adds, never removes)."""
    _log(f"note {text}")
    return "noted"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def request_key(ctx: Context) -> str:
    """Say the idempotency key the request's _meta carries."""
    meta = ctx.request_context.meta or {}
    return f"key: {meta.get('hookmesh/idempotencyKey', '')}"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> Image:
    """A one-pixel picture."""
    return Image(data=PNG, format="png")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def report() -> list:
    """A report: text, a chime and an attached PDF."""
    chime = Audio(data=WAV, format="wav").to_audio_content()
    pdf = EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(
            uri="file:///report.pdf",
            mime_type="application/pdf",
            blob=base64.b64encode(b"%PDF-1.7 test").decode(),
        ),
    )
    return [TextContent(type="text", text="the report"), chime, pdf]


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail() -> str:
    """Always fails."""
    raise ToolError("the disk is on fire")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await anyio.sleep(seconds)
    return "finally"


def extra() -> str:
    """A tool that appears later."""
    return "extra!"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def enable_extra(ctx: Context) -> str:
    """Add the tool `extra` and tell the client."""
    mcp.add_tool(extra)
    await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28 sessions)
    with contextlib.suppress(Exception):  # handshake-era sessions hear a notification
        await ctx.session.send_tool_list_changed()
    return "extra is live"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Start a child process, then die at once, leaving the child behind."""
    child = subprocess.Popen(
        ["sleep", "300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _log(f"child {child.pid}")
    os._exit(3)


def _serve_http() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(mcp.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        mcp.run()


def middleware() -> object:
    """An MCP tools middleware on this server over stdio (for `hookmesh sidecar`)."""
    from hookmesh.middleware.builtin.mcp_tools import McpToolsMiddleware

    return McpToolsMiddleware(
        [{"name": "test", "command": sys.executable, "args": [__file__], "allow": ["echo"]}]
    )
