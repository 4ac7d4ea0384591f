"""The worker's partition states: one RocksDB store per graph-events partition."""

from __future__ import annotations

from pathlib import Path

from processors.graph import GraphParams
from state.projector import PartitionState
from state.rocks import RocksStore


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
            state = self._open[partition] = PartitionState(
                RocksStore(self._path(partition)), self.params
            )
        return state

    def close(self) -> None:
        for state in self._open.values():
            state.close()
        self._open.clear()
