"""The RocksDB store keeps no write-ahead log of its own (the graph log is
its log): a process killed without closing it leaves the store as of its
last flush, a prefix of its atomic batches, never part of one; a flush
follows a write at most FLUSH_EVERY_S after the last; a clean close keeps
every write."""

import subprocess
import sys
import textwrap

import pytest

from emgas.state.rocks import RocksStore

BATCHES = 6
PAYLOAD = 4 * 2**20  # each batch 4 MiB: several fill the 16 MiB memtable, so some are flushed


def _write_then_die(path, flush_every_s: float | None) -> None:
    """In a process of its own: BATCHES batches, each an offset and its
    payload, then exit without closing the store (no destructor runs). With
    `flush_every_s`, every write flushes, and the process waits until the
    last flush's table file is written before it dies."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from emgas.state import rocks
        if {flush_every_s!r} is not None:
            rocks.FLUSH_EVERY_S = {flush_every_s!r}
        store = rocks.RocksStore(Path({str(path)!r}))
        for n in range({BATCHES}):
            store.write({{b"offset": str(n).encode(), b"payload-%d" % n: bytes([n]) * {PAYLOAD}}})
        if {flush_every_s!r} is not None:
            store._open().flush(wait=True)  # the background flush the last write asked for, awaited
        sys.stdout.flush()
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def _offset_and_payloads(path) -> tuple[int, list[bool]]:
    store = RocksStore(path)
    try:
        offset = store.get(b"offset")
        found = [store.get(b"payload-%d" % n) == bytes([n]) * PAYLOAD for n in range(BATCHES)]
        return (-1 if offset is None else int(offset)), found
    finally:
        store.close()


def test_a_store_killed_between_flushes_reopens_as_a_prefix_of_its_batches(tmp_path):
    _write_then_die(tmp_path / "state", flush_every_s=None)
    offset, found = _offset_and_payloads(tmp_path / "state")
    # Whatever was flushed: batches 0..offset whole, none after (no batch in part).
    assert found == [n <= offset for n in range(BATCHES)]
    assert offset < BATCHES - 1  # the last batch was in the memtable only: lost with the process


def test_a_write_after_flush_every_s_is_kept_by_a_killed_process(tmp_path):
    _write_then_die(tmp_path / "state", flush_every_s=0.0)
    assert _offset_and_payloads(tmp_path / "state") == (BATCHES - 1, [True] * BATCHES)


@pytest.mark.parametrize("batches", [1, 3])
def test_a_closed_store_keeps_every_write(tmp_path, batches):
    store = RocksStore(tmp_path / "state")
    for n in range(batches):
        store.write({b"offset": str(n).encode(), b"payload-%d" % n: bytes([n]) * 1000})
    store.close()
    store = RocksStore(tmp_path / "state")
    try:
        assert store.get(b"offset") == str(batches - 1).encode()
        assert [store.get(b"payload-%d" % n) for n in range(batches)] == [bytes([n]) * 1000 for n in range(batches)]
    finally:
        store.close()
