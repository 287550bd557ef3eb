"""Logging for entry points: one JSON object per line on stderr, at the record's own level. stdout is
never used (in the KCL child it is the protocol channel). `msg` is the message rendered with its
arguments (third-party libraries log `%s` templates); our call sites pass a fixed message and their
fields in `extra`, counts and codes only, never personal data. An exception is named by its class,
never its message or traceback. The files and levels: docs/operations/logs.md."""

from __future__ import annotations

__all__ = ["configure_logging"]

import json
import logging
import sys
from datetime import UTC, datetime

_PER_REQUEST_LOGGERS = ("httpx", "httpcore", "werkzeug", "uvicorn.access")

# Attributes a record carries besides its fields: `color_message` is uvicorn's copy of its template
# with ANSI colour codes for a terminal, its arguments never filled in (`[\x1b[36m%d\x1b[0m]`).
_NOT_FIELDS = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": _message(record),
        }
        for key, value in record.__dict__.items():
            if key not in _NOT_FIELDS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The class only: exception messages and tracebacks can carry data.
            entry["exception"] = record.exc_info[0].__name__
        return json.dumps(entry, default=str)


def _message(record: logging.LogRecord) -> str:
    if not isinstance(record.msg, str):
        return type(record.msg).__name__  # an object logged as the message: never its repr
    try:
        return record.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the template: the template alone
        return record.msg


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # botocore logs request and response bodies at DEBUG, and at INFO where it found credentials
    # ("Found credentials in environment variables."): a second stderr line beside a refusal's one, and
    # nothing an operator acts on. Their warnings and errors still come through.
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    # These log each request's URL or path, and the client's address, at INFO; the service's paths
    # carry user ids. Their warnings and errors still come through.
    for per_request in _PER_REQUEST_LOGGERS:
        logging.getLogger(per_request).setLevel(max(logging.WARNING, logging.getLevelName(level)))
