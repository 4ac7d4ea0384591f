"""The worker's partition states: one RocksDB store per graph-events partition."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from processors.graph import GraphParams
from state.projector import PartitionState
from state.repository import STATE_FORMAT, GraphRepository
from state.rocks import RocksStore

log = logging.getLogger(__name__)


class PartitionStates:
    """Opens partition stores under `root` on first use and keeps them open."""

    def __init__(self, root: Path, params: GraphParams) -> None:
        self.root = root
        self.params = params
        self._open: dict[int, PartitionState] = {}

    def _path(self, partition: int) -> Path:
        return self.root / f"partition-{partition}"

    def get(self, partition: int) -> PartitionState:
        state = self._open.get(partition)
        if state is None:
            state = self._open[partition] = PartitionState(self._store(partition), self.params)
        return state

    def _store(self, partition: int) -> RocksStore:
        """The partition's store; one in an older state format is dropped, so
        recovery rebuilds it from the log (the state is a disposable view)."""
        path = self._path(partition)
        store = RocksStore(path)
        found = GraphRepository(store).state_format()
        if found in (None, STATE_FORMAT):
            return store
        log.warning("state of partition %s is in format %s, not %s: rebuilding it from the log", partition, found, STATE_FORMAT)
        store.close()
        shutil.rmtree(path)
        return RocksStore(path)

    def close(self) -> None:
        for state in self._open.values():
            state.close()
        self._open.clear()
