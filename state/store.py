"""The storage interface: an ordered byte-key store with atomic batches.

One store holds one partition's state (all graphs whose key hashes to it,
plus the log position that state reflects). Two implementations pass the
same contract suite (`tests/contract/test_store_contract.py`):
`MemoryStore` and `RocksStore`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator, Mapping, Sequence, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

# A batch: key -> new value, or None to delete the key.
Batch = Mapping[bytes, bytes | None]


class LazyRecord(ABC):
    """A record a transaction keeps in another form (plain values the fold
    changes often, or makes by the thousand) until it is read as a model or
    committed."""

    __slots__ = ()

    @abstractmethod
    def model(self) -> BaseModel:
        """The record as its model."""

    def encode(self) -> bytes:
        """The record as stored: its model's `model_dump_json`, byte for byte."""
        return self.model().model_dump_json().encode()


class PartitionStore(ABC):
    """Ordered bytes -> bytes; `write` applies a whole batch atomically."""

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    def multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def get_models(self, keys: Sequence[bytes], model: type[M]) -> list[M | None]:
        """The records at `keys` parsed as `model` (None where absent)."""
        return [None if raw is None else model.model_validate_json(raw) for raw in self.multi_get(keys)]

    def get_records(self, keys: Sequence[bytes], model: type[M]) -> list[M | LazyRecord | None]:
        """As `get_models`, but a record pending as a `LazyRecord` comes back as it is."""
        return list(self.get_models(keys, model))

    @abstractmethod
    def scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Items whose key starts with `prefix`, in ascending key order, from
        the first key not below `start` (None: from the first)."""

    def items(self, prefix: bytes) -> dict[bytes, bytes]:
        """Every item whose key starts with `prefix`, by key (a dict, not in
        key order): a whole section read at once, where a caller would only
        make a dict of `scan`'s items."""
        return dict(self.scan(prefix))

    @abstractmethod
    def write(self, batch: Batch) -> None:
        """Apply every put and delete of `batch`, all or none."""

    @abstractmethod
    def close(self) -> None: ...
