"""Stopping a child process the way every hookmesh server expects: SIGTERM first (the server
drains and persists), SIGKILL only when it overstays."""

from __future__ import annotations

import asyncio
import signal


async def stop_process(process: asyncio.subprocess.Process, timeout: float) -> int:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` s; its exit status."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except TimeoutError:
            process.kill()
    return await process.wait()
