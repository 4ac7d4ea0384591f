"""RocksDB `PartitionStore` through rocksdict (raw bytes mode, WriteBatch)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence, cast

from rocksdict import BlockBasedOptions, Options, Rdict, WriteBatch

from emgas.state.errors import StoreClosed, StoreUnavailable
from emgas.state.store import Batch, PartitionStore


class RocksStore(PartitionStore):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        # A turn looks up every pair of its concepts, most of them new: bloom
        # filters answer "not here" without reading a block.
        table = BlockBasedOptions()
        table.set_bloom_filter(10, False)
        options.set_block_based_table_factory(table)
        try:
            self._db: Rdict | None = Rdict(str(path), options)
        except Exception as exc:  # rocksdict raises plain Exception (e.g. the lock of a running worker)
            raise StoreUnavailable(f"cannot open the state at {path}: {exc}") from None

    def _open(self) -> Rdict:
        if self._db is None:
            raise StoreClosed("rocksdb store is closed")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        return self._open().get(key)

    def multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return cast(list[bytes | None], self._open()[list(keys)]) if keys else []

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        items = cast(Iterator[tuple[bytes, bytes]], self._open().items(from_key=prefix))  # keys and values are bytes here
        for key, value in items:
            if not key.startswith(prefix):
                break
            yield key, value

    def write(self, batch: Batch) -> None:
        wb = WriteBatch(raw_mode=True)
        for key, value in batch.items():
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        self._open().write(wb)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
