"""The service's log: one JSON object per line on stderr for each delivery answered, each job
started and ended and each post made (comment, check run, alert), so that an operator's log
tools filter on fields, not on sentences. Every other line of the service's loggers comes out
as JSON too, its text under "message". Values from GitHub or a pull request are data here:
json.dumps escapes their control characters, so no such value can forge a line."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

EVENTS = logging.getLogger("guard.service.events")
Kind = Literal["delivery", "job", "post"]


def event(name: Kind, /, **fields: Any) -> None:
    EVENTS.info(name, extra={"guard_fields": {"event": name} | fields})


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name,
        }
        fields = getattr(record, "guard_fields", None)
        line |= fields if fields is not None else {"message": record.getMessage()}
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def log_json_lines() -> None:
    """Every logger's lines as JSON lines on stderr, from INFO up (procrastinate's worker says
    what it does at INFO); httpx's line per request stays out, as it says nothing an operator
    needs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
