"""The embedded Kafka-protocol broker: librdkafka's mock cluster, via ctypes.

The `confluent-kafka` wheel bundles librdkafka, whose public mock API
(`rdkafka_mock.h`) runs a Kafka-protocol cluster on native threads inside
this process, listening on 127.0.0.1. It needs no Docker and no download.

It is a test and demo broker, not a durable one: each partition keeps at
most ~5 MiB (older data is dropped silently), transactions do not work,
and it cannot create topics through the admin API, so every topic is
created here, up front, with its partition count. See the README.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Iterable

from emgas.streams.errors import BrokerError
from emgas.streams.settings import TopicSpec

_RD_KAFKA_PRODUCER = 0
_ERRSTR_LEN = 512


def _find_librdkafka() -> str:
    import confluent_kafka

    root = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    patterns = (
        os.path.join(root, "confluent_kafka.libs", "librdkafka*.so*"),
        os.path.join(os.path.dirname(confluent_kafka.__file__), ".dylibs", "librdkafka*.dylib"),
    )
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise BrokerError("librdkafka not found inside the confluent-kafka wheel")


def _load_library() -> ctypes.CDLL:
    lib = ctypes.CDLL(_find_librdkafka())
    vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
    signatures = {
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_new": (vp, [vp, ctypes.c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_down": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_up": (ctypes.c_int, [vp, i32]),
        "rd_kafka_err2str": (cp, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class MockCluster:
    """A running mock cluster. Stop every client before calling `close()`:
    clients of a destroyed cluster never recover."""

    def __init__(self, brokers: int = 1, initial_rebalance_delay_ms: int = 200) -> None:
        self._lib = _load_library()
        errstr = ctypes.create_string_buffer(_ERRSTR_LEN)
        conf = self._lib.rd_kafka_conf_new()
        # The handle only hosts the cluster; keep its own logging quiet.
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, _ERRSTR_LEN)
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_LEN)
        if not self._rk:
            raise BrokerError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._mc = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._mc:
            self._lib.rd_kafka_destroy(self._rk)
            raise BrokerError("rd_kafka_mock_cluster_new failed")
        self._check(
            self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(
                self._mc, initial_rebalance_delay_ms
            ),
            "set the initial rebalance delay",
        )
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(
            self._mc
        ).decode()

    def _check(self, err: int, what: str) -> None:
        if err:
            reason = self._lib.rd_kafka_err2str(err).decode()
            raise BrokerError(f"mock cluster could not {what}: {reason}")

    def create_topics(self, topics: Iterable[TopicSpec]) -> None:
        for topic in topics:
            self._check(
                self._lib.rd_kafka_mock_topic_create(
                    self._mc, topic.name.encode(), topic.partitions, 1
                ),
                f"create topic {topic.name}",
            )

    def set_broker_down(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._mc, broker_id), "set down")

    def set_broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._mc, broker_id), "set up")

    def close(self) -> None:
        if self._mc:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> "MockCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
