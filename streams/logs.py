"""Logging set-up of the worker: plain text, or one JSON object per line."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any


class JsonFormatter(logging.Formatter):
    """{"time", "level", "logger", "message"} (+ "exception"), one line each."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def logging_config(log_format: str, level: str) -> dict[str, Any] | None:
    """A `logging.config.dictConfig` for JSON lines on stderr; None keeps Faust's text logs."""
    if log_format != "json":
        return None
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["stderr"]},
    }


class TransientLeaderErrors(logging.Filter):
    """aiokafka logs a failed offset lookup at ERROR and then retries it. Right
    after a topic is created, Kafka's metadata can name a partition's leader
    before that broker has brought the partition online, so every new client
    logged "Failed fetch offsets ... NotLeaderForPartitionError" once and then
    went on. Those retried leader errors are lowered to DEBUG; any other
    error of the lookup stays an ERROR."""

    TRANSIENT = ("NotLeaderForPartitionError", "LeaderNotAvailableError")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.msg.startswith("Failed fetch offsets") and any(
            type(arg).__name__ in self.TRANSIENT for arg in record.args or ()
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def quiet_transient_kafka_errors() -> None:
    """Install `TransientLeaderErrors` on aiokafka's fetcher logger (once)."""
    logger = logging.getLogger("aiokafka.consumer.fetcher")
    if not any(isinstance(f, TransientLeaderErrors) for f in logger.filters):
        logger.addFilter(TransientLeaderErrors())
