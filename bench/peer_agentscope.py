"""Side by side with AgentScope: the same scripted scenario on hookmesh and on the latest
AgentScope release, per empty-chain reply and per pass-through middleware.

The scenario, identical on both sides: one user message, a scripted model answering 160
characters, non-streaming or streamed in 20 chunks of 8; 0, 1, 5 and 10 pass-through
middlewares on on_reasoning and on_model_call, written two ways: `natural` (re-yield every
event, await the model call) and `shortest` (return the downstream stream and awaitable
itself). Every agent is built outside the timed region (a fresh one per reply, so no side
carries history); a reply is timed from the call to its last event.

AgentScope runs in a virtualenv of its own that this script creates (``pip install
agentscope``, the latest from PyPI; never a dependency of hookmesh), in a process of its
own; this file is the measuring code on both sides (``--side hookmesh|agentscope``). The two
sides alternate, RUNS times each, so drift on this shared machine hits both alike; each
figure is the median over runs of that side's median µs per reply. Per-middleware cost is
(µs at 10 - µs at 0) / 10. Goal: hookmesh <= 0.2x AgentScope's per-middleware cost in the
natural style and <= 0.25x its empty-chain reply. Prints figures; asserts nothing.

    .venv/bin/python bench/peer_agentscope.py [--quick] [--venv DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

COUNTS = (0, 1, 5, 10)
STYLES = ("natural", "shortest")
TEXT = "x" * 160
CHUNK = 8
SAMPLES = 300
"""Replies per configuration per run (after as many warm-up replies)."""
RUNS = 3
VENV = Path.home() / ".cache" / "hookmesh-bench" / "agentscope-venv"
TIMEOUT = 900.0


def _hookmesh_factory(stream: bool, style: str, n: int) -> Callable[[], Any]:
    from hookmesh.agent import Agent
    from hookmesh.middleware import Middleware
    from hookmesh.models import ScriptedChatModel

    class Natural(Middleware):
        async def on_reasoning(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
            async for event in next_handler():
                yield event

        async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
            return await next_handler()

    class Shortest(Middleware):
        def on_reasoning(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
            return next_handler()

        def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Awaitable[Any]:
            return next_handler()

    cls = Natural if style == "natural" else Shortest
    model = ScriptedChatModel([TEXT], stream=stream, chunk_size=CHUNK, repeat=True)

    def make() -> Any:
        agent = Agent(model, middlewares=[cls() for _ in range(n)])
        return lambda: agent.reply("hi")

    return make


def _agentscope_factory(stream: bool, style: str, n: int) -> Callable[[], Any]:
    from agentscope.agent import Agent
    from agentscope.credential import CredentialBase
    from agentscope.formatter import OllamaChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.middleware import MiddlewareBase
    from agentscope.model import ChatModelBase
    from agentscope.model._model_response import ChatResponse
    from pydantic import BaseModel

    class Scripted(ChatModelBase):
        class Parameters(BaseModel):
            pass

        def __init__(self) -> None:
            super().__init__(
                CredentialBase(), "scripted", Scripted.Parameters(), stream=stream, max_retries=0
            )
            self.formatter = OllamaChatFormatter()

        async def _call_api(self, model_name: str, messages: Any, *args: Any, **kw: Any) -> Any:
            if not self.stream:
                return ChatResponse(content=[TextBlock(text=TEXT)], is_last=True)

            async def chunks() -> Any:
                for i in range(0, len(TEXT), CHUNK):
                    yield ChatResponse(content=[TextBlock(text=TEXT[i : i + CHUNK])], is_last=False)
                yield ChatResponse(content=[TextBlock(text=TEXT)], is_last=True)

            return chunks()

    class Natural(MiddlewareBase):
        async def on_reasoning(self, agent: Any, input_kwargs: Any, next_handler: Any) -> Any:
            async for event in next_handler():
                yield event

        async def on_model_call(self, agent: Any, input_kwargs: Any, next_handler: Any) -> Any:
            return await next_handler()

    class Shortest(MiddlewareBase):
        def on_reasoning(self, agent: Any, input_kwargs: Any, next_handler: Any) -> Any:
            return next_handler()

        def on_model_call(self, agent: Any, input_kwargs: Any, next_handler: Any) -> Any:
            return next_handler()

    cls = Natural if style == "natural" else Shortest

    def make() -> Any:
        agent = Agent(
            name="bench",
            system_prompt="You are a helpful assistant.",
            model=Scripted(),
            middlewares=[cls() for _ in range(n)],
        )
        message = Msg(name="user", content=[TextBlock(text="hi")], role="user")
        return lambda: agent.reply_stream(message)

    return make


async def _measure(side: str, samples: int, rounds: int) -> dict[str, float]:
    """Median µs per reply of every configuration, configurations interleaved."""
    factory = _hookmesh_factory if side == "hookmesh" else _agentscope_factory
    configs = {
        f"{'stream' if stream else 'non-stream'} {style} {n}": factory(stream, style, n)
        for stream in (False, True)
        for style in STYLES
        for n in COUNTS
    }
    times: dict[str, list[float]] = {name: [] for name in configs}
    batch = max(1, samples // (rounds // 2))
    for i in range(rounds):  # the first half warms up
        order = list(configs.items()) if i % 2 == 0 else list(configs.items())[::-1]
        for name, make in order:
            starts = [make() for _ in range(batch)]
            gc.collect()
            for start in starts:
                began = time.perf_counter()
                async for _event in start():
                    pass
                if i >= rounds // 2:
                    times[name].append((time.perf_counter() - began) * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def _ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} with the latest agentscope from PyPI", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--upgrade", "agentscope"], check=True
        )
    return python


def _run_side(python: str, side: str, samples: int, rounds: int) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.environ.get("PYTHONPATH", "") if side == "hookmesh" else "",
    }
    out = subprocess.run(
        [python, __file__, "--side", side, "--samples", str(samples), "--rounds", str(rounds)],
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--venv", type=Path, default=VENV, help="AgentScope's virtualenv")
    parser.add_argument("--side", choices=("hookmesh", "agentscope"), help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=SAMPLES, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(asyncio.run(_measure(args.side, args.samples, args.rounds))))
        return
    samples, rounds, runs = (4, 4, 1) if args.quick else (SAMPLES, 20, RUNS)
    peer_python = str(_ensure_venv(args.venv))
    version = subprocess.run(
        [peer_python, "-c", "import agentscope; print(agentscope.__version__)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {"hookmesh": [], "agentscope": []}
    for _ in range(runs):
        results["agentscope"].append(_run_side(peer_python, "agentscope", samples, rounds))
        results["hookmesh"].append(_run_side(sys.executable, "hookmesh", samples, rounds))
    figures = {
        side: {k: statistics.median(r[k] for r in runs_) for k in runs_[0]}
        for side, runs_ in results.items()
    }
    print(
        f"hookmesh against AgentScope {version}; {os.cpu_count()} cpus, load average "
        f"{os.getloadavg()[0]:.2f}; {runs} alternating runs per side, {samples} timed replies "
        "per configuration per run; median µs per reply"
    )
    print(f"{'configuration':28s} {'hookmesh':>10s} {'agentscope':>11s} {'ratio':>7s}")
    for name in figures["hookmesh"]:
        ours, theirs = figures["hookmesh"][name], figures["agentscope"][name]
        print(f"  {name:26s} {ours:10.1f} {theirs:11.1f} {ours / theirs:6.2f}x")
    print("per middleware ((µs at 10 - µs at 0) / 10) and per empty-chain reply:")
    for mode in ("non-stream", "stream"):
        for style in STYLES:
            per = {
                side: (f[f"{mode} {style} 10"] - f[f"{mode} {style} 0"]) / 10
                for side, f in figures.items()
            }
            ratio = per["hookmesh"] / per["agentscope"] if per["agentscope"] > 0 else float("nan")
            goal = " (goal <= 0.2x)" if style == "natural" else ""
            print(
                f"  {mode:10s} {style:8s} per middleware: hookmesh {per['hookmesh']:6.2f} µs, "
                f"agentscope {per['agentscope']:6.2f} µs, ratio {ratio:.2f}x{goal}"
            )
        empty = {side: f[f"{mode} natural 0"] for side, f in figures.items()}
        print(
            f"  {mode:10s} empty chain: hookmesh {empty['hookmesh']:.1f} µs, agentscope "
            f"{empty['agentscope']:.1f} µs, ratio {empty['hookmesh'] / empty['agentscope']:.2f}x"
            " (goal <= 0.25x)"
        )


if __name__ == "__main__":
    main()
