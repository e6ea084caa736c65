"""Running the retrieval service as a process until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hookmesh.services.retrieval._config import RetrievalServiceConfig, load_retrieval_config


async def serve(config: RetrievalServiceConfig, *, label: str = "") -> int:
    """Serve until SIGTERM or SIGINT, then stop gracefully; returns the exit status."""
    from hookmesh.services._server import serve_until_signal
    from hookmesh.services.retrieval._app import start_retrieval_service

    return await serve_until_signal(
        lambda: start_retrieval_service(config),
        listen=config.listen,
        label=label,
        grace=config.grace_seconds,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hookmesh.services.retrieval [--config FILE] [--listen H:P] [--store URL]``."""
    parser = argparse.ArgumentParser(
        prog="python -m hookmesh.services.retrieval", description="Serve the retrieval service."
    )
    parser.add_argument("--config", "-c", help="YAML config file (docs/services/retrieval.md)")
    parser.add_argument("--listen", help="host:port; port 0 picks a free one")
    parser.add_argument("--store", help="sqlite:///path.db or postgresql://... (a secret)")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("listen", args.listen), ("store", args.store)) if v}
    try:
        config = load_retrieval_config(args.config, **overrides)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from hookmesh.cli import _run

    return int(_run(serve(config)))
