"""Log lines for people (a terminal) or for machines (JSON, one object per line), each with
the request id of the call it belongs to."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("auto", "json", "text")


class _RequestId(logging.Filter):
    """Stamps each record with the request id of the RPC its task serves ("" outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from hookmesh.services import request_id_var

        record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if getattr(record, "request_id", ""):
            line["request_id"] = record.request_id  # type: ignore[attr-defined]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message [request id]`` — short, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname} {record.name}: {record.getMessage()}"
        if getattr(record, "request_id", ""):
            text += f" [{record.request_id}]"  # type: ignore[attr-defined]
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def setup_logging(level: int, fmt: str) -> None:
    """Log to stderr at `level`: ``json`` lines, ``text``, or ``auto`` (text on a terminal,
    JSON otherwise — a service under a supervisor or in a container)."""
    if fmt == "auto":
        fmt = "text" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestId())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def log_format() -> str:
    """``HOOKMESH_LOG_FORMAT``, lower-cased (``auto`` when unset)."""
    return os.environ.get("HOOKMESH_LOG_FORMAT", "auto").lower()
