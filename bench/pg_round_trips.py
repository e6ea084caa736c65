"""PostgreSQL round trips per reply, counted on the wire, in ``exit`` and ``step`` durability.

One agent service in this process on an embedded PostgreSQL, reached through a relay (this
file) that counts, per connection, the client's *turns*: a burst of bytes the client sends
after the server last spoke (or first). A turn is one round trip the replica waits for,
however many statements it pipelines into it, so the count holds whatever the store does in
one transaction. Each reply is a new session whose scripted model calls one tool, then
streams a short answer (four step boundaries and its end, as in `durability.py`), one reply
at a time. The same window with no reply (the store's background work: lease renewal,
sweeps, LISTEN) is counted too and reported beside it.

Target (issue 35): at most 4 round trips per reply in ``exit`` durability, net of the
background over as long a window, to one decimal (a new pool connection's start-up, a few
turns once in the window, is counted too); the count in ``step`` is stated. Prints
figures; asserts nothing.

    .venv/bin/python bench/pg_round_trips.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass

from hookmesh.client import AgentClient
from hookmesh.services.agent import AgentServiceConfig, load_config, start_agent_service
from hookmesh.testing import EmbeddedPostgres

STEPS = 4
"""Step boundaries of one reply (its end is saved in both modes)."""
TARGET_EXIT = 4
CHUNK = 1 << 16


@dataclass
class Counts:
    """What the relay saw, over every connection."""

    turns: int = 0
    client_bytes: int = 0
    server_bytes: int = 0
    connections: int = 0


class Relay:
    """A TCP relay in front of PostgreSQL that counts the client's turns."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.counts = Counts()
        self.turns: list[bytes] | None = None
        """When set, the first bytes of every turn (to show what each round trip is)."""
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.counts.connections += 1
        spoke = {"last": "server"}
        """Who sent the last burst on this connection."""

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, side: str) -> None:
            counts = self.counts
            try:
                while data := await source.read(CHUNK):
                    if side == "client":
                        if spoke["last"] != "client":
                            counts.turns += 1
                            if self.turns is not None:
                                self.turns.append(data)
                        counts.client_bytes += len(data)
                    else:
                        counts.server_bytes += len(data)
                    spoke["last"] = side
                    sink.write(data)
                    await sink.drain()
            except ConnectionError:
                pass
            finally:
                sink.close()

        # The run may end with a connection the store still holds open.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(
                pump(reader, up_writer, "client"),
                pump(up_reader, writer, "server"),
                return_exceptions=True,
            )


def _statements(burst: bytes) -> str:
    """What one turn sends, for reading: the SQL text in it (frontend messages' strings)."""
    words = [w.decode(errors="replace") for w in burst.split(b"\x00") if len(w) > 3]
    text = " | ".join(w.strip() for w in words if any(c.isalpha() for c in w))
    return " ".join(text.split())[:150]


def _config(store: str) -> AgentServiceConfig:
    return load_config(
        None,
        store=store,
        tools=["hookmesh.suite.demo:get_weather"],
        models={
            "default": {
                "type": "scripted",
                "per_reply": True,
                "chunk_size": 16,
                "turns": [
                    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                    "It is snowing in Oslo: take a warm coat and boots.",
                ],
            }
        },
    )


async def _replies(client: AgentClient, durability: str, count: int) -> None:
    for _ in range(count):
        events = [e async for e in client.reply("weather?", durability=durability)]  # type: ignore[arg-type]
        if events[-1].type != "reply_end":
            raise RuntimeError(f"a reply ended without reply_end: {events[-1]}")


def _delta(after: Counts, before: Counts) -> Counts:
    return Counts(
        after.turns - before.turns,
        after.client_bytes - before.client_bytes,
        after.server_bytes - before.server_bytes,
        after.connections - before.connections,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few replies, for a smoke run")
    parser.add_argument(
        "--show", action="store_true", help="print what each round trip of one reply sends"
    )
    args = parser.parse_args()
    replies, warmup = (5, 3) if args.quick else (200, 20)
    load_before = os.getloadavg()[0]
    rows: dict[str, tuple[Counts, float]] = {}
    async with AsyncExitStack() as stack:
        stack.enter_context(tempfile.TemporaryDirectory())
        pg = stack.enter_context(EmbeddedPostgres())
        relay = Relay(pg.port)
        await relay.start()
        stack.push_async_callback(relay.stop)
        store = pg.url.replace(f":{pg.port}/", f":{relay.port}/")
        service = await start_agent_service(_config(store), address="127.0.0.1:0")
        stack.push_async_callback(service.stop, None)
        client = await stack.enter_async_context(
            AgentClient(f"127.0.0.1:{service.port}", timeout=120)
        )
        for mode in ("exit", "step"):
            await _replies(client, mode, warmup)
        for mode in ("exit", "step"):
            before = Counts(**vars(relay.counts))
            began = time.perf_counter()
            await _replies(client, mode, replies)
            rows[mode] = (_delta(relay.counts, before), time.perf_counter() - began)
        shown: dict[str, list[bytes]] = {}
        if args.show:
            for mode in ("exit", "step"):
                relay.turns = shown[mode] = []
                await _replies(client, mode, 1)
            relay.turns = None
        # The store's own background traffic over as long a window with no reply.
        before = Counts(**vars(relay.counts))
        idle = max(seconds for _, seconds in rows.values())
        await asyncio.sleep(idle)  # NOTE(bench): a measuring window, not a synchronisation
        background = _delta(relay.counts, before)
    print(
        f"python, {os.cpu_count()} cpus, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {replies} replies per mode, one at a time, after "
        f"{warmup} warm-up; {STEPS} steps per reply; each reply a new session"
    )
    print(
        f"\n{'durability':12s} {'round trips/reply':>18s} {'client B/reply':>15s} "
        f"{'server B/reply':>15s} {'new conns':>10s} {'window s':>9s} {'net of idle':>12s}"
    )
    # A row's turns less the background's over as long a window: the reply's own.
    net = {
        mode: (counts.turns - background.turns * seconds / idle) / replies
        for mode, (counts, seconds) in rows.items()
    }
    for mode, (counts, seconds) in rows.items():
        print(
            f"  {mode:10s} {counts.turns / replies:18.2f} {counts.client_bytes / replies:15.0f} "
            f"{counts.server_bytes / replies:15.0f} {counts.connections:10d} {seconds:9.2f}"
            f" {net[mode]:12.2f}"
        )
    print(
        f"  {'idle':10s} {background.turns:>13d} in all over {idle:.2f} s with no reply "
        "(background: leases, sweeps)"
    )
    for mode, bursts in shown.items():
        print(f"\none {mode} reply, turn by turn:")
        for i, burst in enumerate(bursts, 1):
            print(f"  {i:2d}. {_statements(burst)}")
    exit_turns, step_turns = net["exit"], net["step"]
    print(
        f"  -> round trips per reply: exit {exit_turns:.2f} net of idle (target <= {TARGET_EXIT}, "
        f"{'met' if round(exit_turns, 1) <= TARGET_EXIT else 'missed'}), step {step_turns:.2f} "
        f"({(step_turns - exit_turns) / STEPS:.2f} more per step boundary)"
    )


if __name__ == "__main__":
    asyncio.run(main())
