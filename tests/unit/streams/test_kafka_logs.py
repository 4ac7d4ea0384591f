"""Transient leader errors of aiokafka's offset lookups are DEBUG, not ERROR (streams.logs)."""

import logging

import pytest
from aiokafka.errors import KafkaConnectionError, LeaderNotAvailableError, NotLeaderForPartitionError

from emgas.streams.logs import TransientLeaderErrors, quiet_transient_kafka_errors


def record(msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka.consumer.fetcher", level, __file__, 1, msg, args, None)


@pytest.mark.parametrize("msg, args, level", [
    ("Failed fetch offsets from %s: %s", (1, NotLeaderForPartitionError()), logging.DEBUG),
    ("Failed fetch offsets from %s: %s", (1, LeaderNotAvailableError()), logging.DEBUG),
    ("Failed fetch offsets from %s: %s", (1, KafkaConnectionError()), logging.ERROR),  # not a leader's transient
    ("Unexpected error in fetcher routine: %s", (NotLeaderForPartitionError(),), logging.ERROR),  # another message
])
def test_only_the_retried_leader_errors_of_an_offset_lookup_are_lowered(msg, args, level):
    entry = record(msg, *args)
    assert TransientLeaderErrors().filter(entry) is True  # never dropped: DEBUG handlers still see it
    assert entry.levelno == level


def test_installed_once_it_keeps_the_line_from_an_error_handler(caplog):
    quiet_transient_kafka_errors()
    quiet_transient_kafka_errors()
    logger = logging.getLogger("aiokafka.consumer.fetcher")
    assert sum(isinstance(f, TransientLeaderErrors) for f in logger.filters) == 1
    with caplog.at_level(logging.WARNING):
        logger.error("Failed fetch offsets from %s: %s", 1, NotLeaderForPartitionError())
        logger.error("Failed fetch offsets from %s: %s", 1, KafkaConnectionError())
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == ["ERROR"]
