"""The RocksDB stores of one process share one memory budget: their memtables
together stay near MEMTABLE_BUDGET_BYTES however many stores are written,
instead of each growing to its own 64 MiB (the worker's RSS grew so). A
store may be written without RocksDB's write-ahead log (a replay's)."""

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


def _logged_bytes(folder):
    """Bytes in RocksDB's write-ahead log files of the store in `folder`."""
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def test_a_store_without_its_write_ahead_log_keeps_its_writes_once_closed(tmp_path):
    value = os.urandom(1000)
    unlogged, logged = RocksStore(tmp_path / "unlogged", write_ahead_log=False), RocksStore(tmp_path / "logged")
    try:
        for store in (unlogged, logged):
            store.write({f"k{i}".encode(): value for i in range(500)})
            store.write({b"k7": None})
        assert _logged_bytes(tmp_path / "unlogged") == 0
        assert _logged_bytes(tmp_path / "logged") > 500 * 1000
    finally:
        unlogged.close()
        logged.close()
    reopened = RocksStore(tmp_path / "unlogged")  # closing flushed the memtables to the store's files
    try:
        assert reopened.get(b"k499") == value and reopened.get(b"k7") is None
        assert len(list(reopened.scan(b"k"))) == 499
    finally:
        reopened.close()
