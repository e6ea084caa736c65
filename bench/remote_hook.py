"""Added latency of a remote (sidecar) hook invocation, as ratios to a raw grpc.aio round trip.

One run on loopback, each server in its own process (uvloop there when installed, as
`hookmesh sidecar` does; the agent side uses uvloop too when installed):

* floor: raw grpc.aio bidi ping-pong (``await call.write``, then ``await call.read``) of a
  PAYLOAD-byte message against a generic bytes-in/bytes-out echo server (this file,
  ``--echo-server``). Two more rows re-add hookmesh's stream plumbing around the same bytes,
  with no protobuf work: the agent side's request-iterator writer, reader task and
  per-invocation inbox with its deadline (`hookmesh.remote._mailbox`); then also the
  sidecar side's reader task, task per invocation and out queue (echo method
  ``EchoQueued``).
* cases (a) intercept, (b) pre_only, (c) observe: one ``RemoteMiddleware.on_reasoning``
  invocation driven as the agent does (a real Agent supplies name, reply id and state;
  ``next_handler`` yields 3 events), minus the same middleware in process, against
  ``hookmesh sidecar`` processes serving `remote_middlewares`. Also whole ``agent.reply()``
  calls (scripted model, one reasoning step) with the remote middleware minus without any
  middleware. The ratio columns use the direct figure.
* the same (a) and (b) against ``hookmesh sidecar --listen unix:///...`` processes, as ratios
  to a raw round trip over a Unix-domain socket measured in the same run.
* case (d): a streamed reply (26 events) through an on_reply sidecar subscribed to none of
  them, sidecar in process so both sides' message counts by kind can be read.

Concurrency 1 (one invocation outstanding). Rows are sampled in short interleaved rounds so
drift (this machine is shared) hits every row alike. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from hookmesh.testing import stop_process

PAYLOAD = 160
"""Bytes per echo message: about one serialized on_reasoning invocation plus framing slack."""
WARMUP = 300
ROUNDS = 15
"""Short interleaved rounds: this machine's speed drifts (other work), so every row samples
every period alike; per-round ratios are reported too."""
PER_ROUND = 200
REPLIES = 130
"""Per round, per case, for the agent.reply() figures."""
START_TIMEOUT = 60.0
"""Seconds a server process may take to start: a loaded 2-core machine starting several
Python processes at once needs more than 20."""
BENCH_DIR = Path(__file__).resolve().parent
_ECHO = "/hookmesh.bench.Echo/Echo"
_ECHO_QUEUED = "/hookmesh.bench.Echo/EchoQueued"
_TARGETS = {"a": 2.3, "b": 1.2, "c": 0.05}
"""Issue 35's targets: added p50 over the raw round trip's p50."""
_D_CASES = {
    "QuietReply": "intercept, subscribed to none",
    "QuietReplyPreOnly": "pre_only, subscribed to none",
    "QuietReplyObserve": "observe, subscribed to none",
    "EveryReplyEvent": 'intercept, subscribed to "*" (contrast)',
    "WatchEveryReplyEvent": 'intercept, read-only "*" (no verdicts; queued items coalesce)',
}


# --- the echo server process -----------------------------------------------------------------


async def _echo(
    request_iterator: AsyncIterator[bytes], unused_context: Any
) -> AsyncIterator[bytes]:
    async for request in request_iterator:
        yield request


async def _echo_queued(
    request_iterator: AsyncIterator[bytes], unused_context: Any
) -> AsyncIterator[bytes]:
    """The sidecar host's hops without its work: reader task, a task per message, out queue."""
    out: asyncio.Queue[bytes | None] = asyncio.Queue()
    tasks: set[asyncio.Task[None]] = set()

    async def handle(request: bytes) -> None:
        out.put_nowait(request)

    async def read() -> None:
        try:
            async for request in request_iterator:
                task = asyncio.create_task(handle(request))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            out.put_nowait(None)

    reader = asyncio.create_task(read())
    try:
        while (response := await out.get()) is not None:
            yield response
    finally:
        reader.cancel()


async def _serve_echo(address: str) -> None:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "hookmesh.bench.Echo",
        {
            "Echo": grpc.stream_stream_rpc_method_handler(_echo),
            "EchoQueued": grpc.stream_stream_rpc_method_handler(_echo_queued),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(address)
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    bound = address if address.startswith("unix:") else f"127.0.0.1:{port}"
    print(f"listening on {bound}", flush=True)
    await stop.wait()
    await server.stop(1.0)


# --- processes ---------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used, from its own counters."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def _start(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "HOOKMESH_LOG_LEVEL": "WARNING"},
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            line = (await process.stdout.readline()).decode().strip()
        if not line.startswith("listening on "):
            raise RuntimeError(f"{args} did not start: {line!r}")
    except BaseException:
        # NOTE(bench): a server that did not start in time is not left running (nor, by the
        # caller, those started beside it).
        await stop_process(process, START_TIMEOUT)
        raise
    return process, line.removeprefix("listening on ")


async def _start_all(*commands: tuple[str, ...]) -> list[tuple[asyncio.subprocess.Process, str]]:
    """`_start` each command at once; when one fails, those that started are stopped."""
    results = await asyncio.gather(*(_start(*c) for c in commands), return_exceptions=True)
    started = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        await asyncio.gather(*(stop_process(p, START_TIMEOUT) for p, _ in started))
        raise failed[0]
    return started


def _sidecar(attr: str, listen: str = "127.0.0.1:0") -> tuple[str, ...]:
    return (
        "-m",
        "hookmesh.cli",
        "sidecar",
        "--middleware",
        f"remote_middlewares:{attr}",
        "--listen",
        listen,
        "--app-dir",
        str(BENCH_DIR),
    )


# --- measuring -----------------------------------------------------------------------------------

Probe = Callable[[], Awaitable[Any]]


async def _sample(probe: Probe, n: int, out: list[float]) -> float:
    """Time `n` calls of `probe` (µs each, into `out`); returns the event-loop thread's CPU µs
    per call, background work included (writer and reader tasks, gRPC callbacks)."""
    gc.collect()
    cpu = time.thread_time()
    for _ in range(n):
        start = time.perf_counter()
        await probe()
        out.append((time.perf_counter() - start) * 1e6)
        # NOTE(bench): lets send-and-go writers run between samples, outside the timing.
        await asyncio.sleep(0)
    return (time.thread_time() - cpu) / n * 1e6


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Skeleton:
    """RemoteMiddleware's InterceptStream plumbing around raw bytes: request-iterator writer
    (its outgoing mailbox), reader task, one inbox mailbox with its deadline per wait."""

    def __init__(self, method: Any) -> None:
        from hookmesh.remote._mailbox import Mailbox

        self.outgoing = Mailbox()
        self.inbox = Mailbox(5.0)
        self.call = method(self._requests())
        self.reader = asyncio.create_task(self._read())

    async def _requests(self) -> AsyncIterator[bytes]:
        while (request := await self.outgoing.get()) is not None:
            yield request

    async def _read(self) -> None:
        async for response in self.call:
            self.inbox.put_nowait(response)

    async def round_trip(self, payload: bytes) -> None:
        self.outgoing.put_nowait(payload)
        await self.inbox.get()

    async def close(self) -> None:
        self.outgoing.put_nowait(None)
        self.call.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)


_sent: Counter[str] = Counter()


def _count_sends() -> None:
    """Count what every RemoteMiddleware stream sends, by message kind (agent side)."""
    from hookmesh.remote._stream import InterceptStream as _Stream

    original = _Stream.send

    def send(self: Any, request: Any, read_only: bool = False) -> None:
        _sent[request.WhichOneof("message")] += 1
        original(self, request, read_only)

    _Stream.send = send  # type: ignore[method-assign]
    direct = getattr(_Stream, "write", None)
    if direct is not None:  # a stream that also writes from the invoking task

        async def write(self: Any, request: Any) -> None:
            _sent[request.WhichOneof("message")] += 1
            await direct(self, request)

        _Stream.write = write  # type: ignore[attr-defined]


async def _quiet_reply_counts(
    attr: str,
) -> tuple[Counter[str], Counter[str], Counter[str], int, int]:
    """(d): message counts per reply for one streamed reply through an in-process sidecar."""
    import remote_middlewares as mws

    from hookmesh.agent import Agent, AgentState
    from hookmesh.models import ScriptedChatModel
    from hookmesh.remote import RemoteMiddleware, serve_middleware
    from hookmesh.remote._call import HostCall

    answered: Counter[str] = Counter()
    original = HostCall.send

    def send(self: Any, **message: Any) -> None:
        if not self.muted:
            answered[next(iter(message))] += 1
        original(self, **message)

    HostCall.send = send  # type: ignore[method-assign]
    running = await serve_middleware(getattr(mws, attr)())
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}")
    try:
        agent = Agent(
            ScriptedChatModel(["x" * 160], stream=True, chunk_size=8, repeat=True),
            middlewares=[remote],
        )
        replies, events = 20, 0
        _sent.clear()
        for _ in range(replies):
            agent.state = AgentState()
            async for _event in agent.reply("hi"):
                events += 1
        await asyncio.sleep(0.1)  # NOTE(bench): observe sends are flushed by the writer task.
        received = running.servicers["hookmesh.v1.MiddlewareService"].received

        def per(counts: Counter[str]) -> Counter[str]:
            return Counter({k: round(v / replies) for k, v in counts.items()})

        return per(_sent), per(received), per(answered), replies, events // replies
    finally:
        HostCall.send = original  # type: ignore[method-assign]
        await remote.aclose()
        await running.stop(None)


# --- the run -------------------------------------------------------------------------------------


async def main() -> None:
    sys.path.insert(0, str(BENCH_DIR))
    import remote_middlewares as mws

    from hookmesh.agent import Agent, AgentState, new_id
    from hookmesh.models import ScriptedChatModel
    from hookmesh.remote import RemoteMiddleware
    from hookmesh.schema import ModelCallEndEvent, ModelCallStartEvent, TextBlockDeltaEvent
    from hookmesh.v1 import middleware_pb2 as _mw_pb2

    try:
        import uvloop

        loop = "uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio"
    except ImportError:
        loop = "asyncio"
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    this_file = str(BENCH_DIR / "remote_hook.py")
    cases = {"a": "InterceptPassThrough", "b": "PreOnlyPassThrough", "c": "ObservePassThrough"}
    sockets = tempfile.mkdtemp(prefix="hookmesh-bench-")
    unix = {f"{k}_unix": f"unix://{sockets}/{k}.sock" for k in ("a", "b")}
    started = await _start_all(
        (this_file, "--echo-server"),
        (this_file, "--echo-server", f"unix://{sockets}/echo.sock"),
        *(_sidecar(a) for a in cases.values()),
        *(_sidecar(cases[k[0]], listen) for k, listen in unix.items()),
    )
    processes = [p for p, _ in started]
    echo_target, echo_unix = started[0][1], started[1][1]
    remotes: dict[str, RemoteMiddleware] = {}
    channel = grpc.aio.insecure_channel(echo_target)
    unix_channel = grpc.aio.insecure_channel(echo_unix)
    try:
        await asyncio.wait_for(channel.channel_ready(), START_TIMEOUT)
        await asyncio.wait_for(unix_channel.channel_ready(), START_TIMEOUT)
        echo = channel.stream_stream(_ECHO)
        payload = os.urandom(PAYLOAD)
        raw_call = echo()
        raw_unix_call = unix_channel.stream_stream(_ECHO)()

        async def raw() -> None:
            await raw_call.write(payload)
            await raw_call.read()

        async def raw_unix() -> None:
            await raw_unix_call.write(payload)
            await raw_unix_call.read()

        skeleton = _Skeleton(echo)
        skeleton_both = _Skeleton(channel.stream_stream(_ECHO_QUEUED))

        _count_sends()
        for key, (_, target) in zip([*cases, *unix], started[2:], strict=True):
            remotes[key] = await RemoteMiddleware.connect(target)
            await remotes[key].wait_ready(START_TIMEOUT)

        rid = new_id()
        agent = Agent(ScriptedChatModel(["hello"], repeat=True), name="bench")
        agent.reply_id = rid
        kwargs = {"tool_choice": "auto"}
        events = [
            ModelCallStartEvent(reply_id=rid, model_name="scripted"),
            TextBlockDeltaEvent(reply_id=rid, block_id=f"{rid}-1", delta="hello"),
            ModelCallEndEvent(reply_id=rid, model_name="scripted"),
        ]

        async def downstream() -> AsyncIterator[Any]:
            for event in events:
                yield event

        def next_handler(**unused_overrides: Any) -> AsyncIterator[Any]:
            return downstream()

        def hook_probe(mw: Any) -> Probe:
            async def probe() -> None:
                async for _event in mw.on_reasoning(agent, kwargs, next_handler):
                    pass

            return probe

        def reply_probe(middlewares: list[Any]) -> Probe:
            replier = Agent(ScriptedChatModel(["hello"], repeat=True), middlewares=middlewares)

            async def probe() -> None:
                replier.state = AgentState()
                async for _event in replier.reply("hi"):
                    pass

            return probe

        probes: dict[str, Probe] = {
            "raw": raw,
            "raw_unix": raw_unix,
            "skeleton": lambda: skeleton.round_trip(payload),
            "skeleton_both": lambda: skeleton_both.round_trip(payload),
            "local": hook_probe(mws.InterceptPassThrough()),
            **{key: hook_probe(remote) for key, remote in remotes.items()},
        }
        reply_probes: dict[str, Probe] = {
            "none": reply_probe([]),
            **{key: reply_probe([remote]) for key, remote in remotes.items() if key in cases},
        }
        samples: dict[str, list[float]] = {
            k: [] for k in [*probes, *(f"reply_{k}" for k in reply_probes)]
        }
        rounds: dict[str, list[float]] = {k: [] for k in samples}
        """Per-round p50s, for ratios taken within a round."""
        cpu: dict[str, float] = dict.fromkeys(probes, 0.0)
        pids = [p.pid for p, _ in started]
        serving = {"raw": pids[0], "raw_unix": pids[1], "skeleton": pids[0]}
        serving |= {"skeleton_both": pids[0], **dict(zip([*cases, *unix], pids[2:], strict=True))}
        """The process that answers each probe's messages: the echo server or the sidecar."""
        peer_cpu: dict[str, float] = dict.fromkeys(probes, 0.0)
        sent_per: dict[str, Counter[str]] = {}
        for probe in [*probes.values(), *reply_probes.values()]:
            await _sample(probe, WARMUP, [])
        for _ in range(ROUNDS):
            for name, probe in probes.items():
                before, batch = Counter(_sent), list[float]()
                peer = serving.get(name)
                peer_before = process_cpu(peer) if peer else 0.0
                cpu[name] += await _sample(probe, PER_ROUND, batch) / ROUNDS
                if peer:
                    peer_cpu[name] += (process_cpu(peer) - peer_before) / ROUNDS / PER_ROUND * 1e6
                samples[name] += batch
                rounds[name].append(_pct(batch, 0.5))
                sent_per[name] = Counter(
                    {k: (v - before[k]) / PER_ROUND for k, v in _sent.items() if v > before[k]}
                )
            for name, probe in reply_probes.items():
                batch = list[float]()
                await _sample(probe, REPLIES, batch)
                samples[f"reply_{name}"] += batch
        await skeleton.close()
        await skeleton_both.close()
        raw_call.cancel()
        raw_unix_call.cancel()

        d_counts = {attr: await _quiet_reply_counts(attr) for attr in _D_CASES}
        invocation_bytes = _mw_pb2.InterceptRequest(
            invocation_id="1",
            invocation=_mw_pb2.HookInvocation(
                hook=_mw_pb2.HOOK_ON_REASONING,
                reply_id=rid,
                agent_name="bench",
                kind=_mw_pb2.MESSAGE_KIND_FLAT,
                reasoning=_mw_pb2.ReasoningArgs(tool_choice="auto"),
            ),
        ).ByteSize()
    finally:
        for remote in remotes.values():
            await remote.aclose()
        await channel.close()
        await unix_channel.close()
        await asyncio.gather(*(stop_process(p, START_TIMEOUT) for p in processes))
        shutil.rmtree(sockets, ignore_errors=True)

    _report(
        samples,
        rounds,
        (cpu, peer_cpu),
        sent_per,
        d_counts,
        setup=(
            loop,
            invocation_bytes,
            load_before,
            os.getloadavg()[0],
            time.perf_counter() - began,
        ),
    )


def _report(
    samples: dict[str, list[float]],
    rounds: dict[str, list[float]],
    cpus: tuple[dict[str, float], dict[str, float]],
    sent_per: dict[str, Counter[str]],
    d_counts: dict[str, Any],
    setup: tuple[str, int, float, float, float],
) -> None:
    loop, invocation_bytes, load_before, load_after, elapsed = setup
    cpu, peer_cpu = cpus
    p50 = {k: _pct(v, 0.50) for k, v in samples.items()}
    p99 = {k: _pct(v, 0.99) for k, v in samples.items()}
    raw50, raw99 = p50["raw"], p99["raw"]

    def per_round(key: str) -> float:
        """Median over rounds of (key - local) / raw, from each round's p50s: robust to drift."""
        base = rounds["local"] if key in _TARGETS else [0.0] * ROUNDS
        ratios = [(k - b) / r for k, b, r in zip(rounds[key], base, rounds["raw"], strict=True)]
        return statistics.median(ratios)

    print(
        f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, agent loop {loop}; echo "
        f"server and sidecars in their own processes (uvloop when installed); "
        f"{os.cpu_count()} cpus, load average {load_before:.2f} before, {load_after:.2f} after"
    )
    print(
        f"{ROUNDS} interleaved rounds x {PER_ROUND} = {ROUNDS * PER_ROUND} samples per row after "
        f"{WARMUP} warm-up, concurrency 1; echo payload {PAYLOAD} B (an on_reasoning invocation "
        f"is {invocation_bytes} B); {ROUNDS * REPLIES} replies per reply row"
    )
    print()
    head = ("p50 µs", "p99 µs", "/raw p50", "per-round", "loop cpu µs", "peer cpu µs")
    print(
        f"{'floor':48s} {head[0]:>8s} {head[1]:>8s} {head[2]:>9s} {head[3]:>9s} {head[4]:>11s}"
        f" {head[5]:>11s}"
    )
    for name, label in [
        ("raw", "raw grpc.aio bidi round trip (write, then read)"),
        ("skeleton", "+ agent plumbing (queue writer, reader, inbox)"),
        ("skeleton_both", "+ sidecar plumbing (reader, task, out queue)"),
        ("local", "pass-through on_reasoning in process"),
    ]:
        print(
            f"  {label:46s} {p50[name]:8.1f} {p99[name]:8.1f} {p50[name] / raw50:8.2f}x"
            f" {per_round(name):8.2f}x {cpu[name]:11.1f} {peer_cpu[name]:11.1f}"
        )
    print()
    print("added latency per hook invocation: remote on_reasoning - the same middleware in process")
    cols = ("+p50 µs", "+p99 µs", "/raw p50", "per-round", "/raw p99", "target", "loop cpu µs")
    print(
        f"{'case':32s} {cols[0]:>8s} {cols[1]:>8s} {cols[2]:>9s} {cols[3]:>9s} {cols[4]:>9s}"
        f" {cols[5]:>8s} {cols[6]:>11s} {'peer cpu µs':>11s} {'reply +p50':>10s}"
        f" {'reply +p99':>10s}  sent/invocation"
    )
    labels = {
        "a": "(a) intercept, no subscriptions",
        "b": "(b) pre_only",
        "c": "(c) observe (caller blocked)",
    }
    for key, label in labels.items():
        add50, add99 = p50[key] - p50["local"], p99[key] - p99["local"]
        reply50 = p50[f"reply_{key}"] - p50["reply_none"]
        reply99 = p99[f"reply_{key}"] - p99["reply_none"]
        sent = ", ".join(f"{k} {v:g}" for k, v in sorted(sent_per.get(key, {}).items()))
        target = f"<= {_TARGETS[key]:g}x"
        print(
            f"{label:32s} {add50:8.1f} {add99:8.1f} {add50 / raw50:8.2f}x {per_round(key):8.2f}x"
            f" {add99 / raw99:8.2f}x {target:>8s} {cpu[key] - cpu['local']:11.1f}"
            f" {peer_cpu[key]:11.1f} {reply50:10.1f} {reply99:10.1f}  {sent}"
        )
    print(
        "  /raw: pooled p50 (p99) over raw's pooled p50 (p99); per-round: median of the rounds' "
        "p50 ratios.\n  loop cpu: the agent's event-loop thread CPU per call, background tasks "
        "included, minus local's.\n  peer cpu: the answering process's CPU per call (every "
        "thread, its own /proc counters): the echo server for the floor rows, the sidecar for "
        "the cases.\n  reply: agent.reply() with the remote middleware minus "
        f"without any (baseline p50 {p50['reply_none']:.1f} µs, p99 {p99['reply_none']:.1f} µs)."
        "\n  (c) leaves its writer's work to run after the caller goes on (see loop cpu)."
    )
    print()
    unix50 = p50["raw_unix"]
    print(
        f"Unix-domain socket (unix:// sidecars), against its own raw round trip "
        f"(p50 {unix50:.1f} µs, p99 {p99['raw_unix']:.1f} µs; TCP raw / unix raw "
        f"{raw50 / unix50:.2f}x)"
    )
    for key, label in (("a_unix", labels["a"]), ("b_unix", labels["b"])):
        add50 = p50[key] - p50["local"]
        ratios = [
            (k - b) / r
            for k, b, r in zip(rounds[key], rounds["local"], rounds["raw_unix"], strict=True)
        ]
        print(
            f"{label:32s} {add50:8.1f} {p99[key] - p99['local']:8.1f} {add50 / unix50:8.2f}x"
            f" {statistics.median(ratios):8.2f}x  target <= {_TARGETS[key[0]]:g}x (TCP's);"
            f" sidecar cpu {peer_cpu[key]:.1f} µs (echo {peer_cpu['raw_unix']:.1f})"
        )
    print()
    print(
        "(d) a streamed reply through an on_reply sidecar in process: Intercept messages per reply"
    )
    for attr, (sent, received, answered, _replies, _events) in d_counts.items():
        print(f"  {_D_CASES[attr]}:")
        print(
            f"    agent sent {dict(sent)}; sidecar received {dict(received)}; "
            f"sidecar answered {dict(answered)}"
        )
    _, _, _, replies, events = d_counts["QuietReply"]
    print(f"  ({events} events per reply, {replies} replies per case)")
    extra = {k: v for k, v in d_counts["QuietReply"][0].items() if k != "invocation"}
    beyond_outcome = sum(v for k, v in extra.items() if k != "outcome")
    pre_only = sum(d_counts["QuietReplyPreOnly"][0].values()) - 1
    print(
        f"  target, zero beyond the invocation: intercept {sum(extra.values())} "
        f"({', '.join(f'{k} {v}' for k, v in extra.items()) or 'none'}: the post phase, answered "
        f"by done), {beyond_outcome} beyond invocation + outcome; pre_only {pre_only}"
    )
    print(f"\nwhole run {elapsed:.1f} s")


def _run(coro: Any) -> None:
    try:
        import uvloop

        uvloop.run(coro)
    except ImportError:
        asyncio.run(coro)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--echo-server", nargs="?", const="127.0.0.1:0", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.quick:
        WARMUP, ROUNDS, PER_ROUND, REPLIES = 10, 2, 10, 5
    _run(_serve_echo(options.echo_server) if options.echo_server else main())
