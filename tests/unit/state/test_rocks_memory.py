"""The RocksDB stores of one process share one memory budget: their memtables
together stay near MEMTABLE_BUDGET_BYTES however many stores are written,
instead of each growing to its own 64 MiB (the worker's RSS grew so)."""

import os

from emgas.state import rocks
from emgas.state.rocks import MEMTABLE_BUDGET_BYTES, RocksStore


def test_memtables_of_many_stores_stay_within_one_budget(tmp_path):
    stores = [RocksStore(tmp_path / f"partition-{p}") for p in range(6)]
    try:
        value = os.urandom(1000)
        for round_ in range(12):  # 6 stores x 12 x 2,000 records of 1 KB: ~144 MiB written
            for p, store in enumerate(stores):
                store.write({f"{p}-{round_}-{i}".encode(): value for i in range(2000)})
        _, memtables = rocks._memory()
        assert memtables.enabled()
        assert memtables.get_usage() <= 1.25 * MEMTABLE_BUDGET_BYTES
        assert stores[3].get(b"3-11-1999") == value and stores[0].get(b"0-0-0") == value
    finally:
        for store in stores:
            store.close()
