"""Loading objects named by ``package.module:attribute`` import paths (config, CLI)."""

from __future__ import annotations

import importlib
from typing import Any


def load_object(spec: str) -> Any:
    """Import ``package.module:attribute`` (attribute may be dotted).

    Raises:
        ValueError: The spec is malformed or names nothing importable.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} must look like 'package.module:attribute'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {spec!r}: {exc}") from None
    return target
