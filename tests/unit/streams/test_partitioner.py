"""Keyed records go where aiokafka's default partitioner (the Java client's murmur2) sends them."""

from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka.partitioner import DefaultPartitioner

from emgas.streams.kafka import partitioner
from emgas.streams.kafka.partitioner import KeyPartitioner


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30), st.integers(1, 64))
def test_each_key_goes_where_the_default_partitioner_sends_it(keys, count):
    partitions = list(range(count))
    mine = KeyPartitioner()
    for key in keys + keys:  # the second time from what it kept
        assert mine(key, partitions, partitions) == DefaultPartitioner()(key, partitions, partitions)


def test_a_known_key_and_a_full_memory(monkeypatch):
    monkeypatch.setattr(partitioner, "MAX_KEYS", 2)
    mine = KeyPartitioner()
    assert [mine(k, list(range(6)), []) for k in (b"a", b"b", b"c", b"a")] == [
        DefaultPartitioner()(k, list(range(6)), []) for k in (b"a", b"b", b"c", b"a")
    ]
    assert len(mine._hashes) <= 2
    assert mine(None, [3], []) == 3  # no key: a partition of those there are


def test_the_workers_producer_uses_it(tmp_path):
    from emgas.streams.runtime.app import faust_app
    from emgas.streams.settings import Settings

    app = faust_app(Settings(home=tmp_path, broker="127.0.0.1:9"))
    assert isinstance(app.conf.producer_partitioner, KeyPartitioner)


async def test_the_workers_producer_and_the_passthroughs_batch_alike(tmp_path):
    from emgas.streams.runtime.app import faust_app
    from emgas.streams.settings import PRODUCE_BATCH_BYTES, Settings
    from emgas.tools.bench.kafka_alone import _producer

    settings = Settings(home=tmp_path, broker="127.0.0.1:9")
    assert faust_app(settings).conf.producer_max_batch_size == PRODUCE_BATCH_BYTES > 16 * 1024
    passthrough = _producer(settings)
    try:
        assert passthrough._message_accumulator._batch_size == PRODUCE_BATCH_BYTES  # like the worker's
    finally:
        await passthrough.stop()
