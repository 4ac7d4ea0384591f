"""Digests of a state directory on disk, and their text rendering."""

from __future__ import annotations

import hashlib
from pathlib import Path

from emgas.processors.events import GraphDigest
from emgas.processors.graph import GraphParams
from emgas.state.digest import partition_digests
from emgas.state.errors import StoreUnavailable
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore


def partition_dirs(state_dir: Path) -> list[Path]:
    """The partition stores of a rebuild directory or of a worker's data directory."""
    for root in (state_dir, state_dir / "state"):
        found = sorted(root.glob("partition-*"), key=lambda p: int(p.name.split("-")[1]))
        if found:
            return found
    raise StoreUnavailable(f"no partition-N state under {state_dir}")


def digests_of_dir(state_dir: Path, graph_id: str | None, params: GraphParams) -> list[GraphDigest]:
    digests = []
    for path in partition_dirs(state_dir):
        state = PartitionState(RocksStore(path), params)
        try:
            digests += partition_digests(state.repo, graph_id)
        finally:
            state.close()
    return digests


def combined_digest(digests: list[GraphDigest]) -> str:
    """One hash over a set of graph versions (order-independent)."""
    lines = sorted(f"{d.graph_id}\x00{d.version}\x00{d.digest}" for d in digests)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def format_digests(digests: list[GraphDigest]) -> str:
    rows = []
    for d in sorted(digests, key=lambda d: (d.graph_id, d.version)):
        counts = "  ".join(f"{name}={d.sections[name].count}" for name in ("concepts", "pairs", "passages"))
        marker = "active" if d.active else "      "
        rows.append(f"{d.digest}  {d.graph_id} v{d.version} {marker}  {counts}")
    rows.append(f"{combined_digest(digests)}  (all {len(digests)} graph versions above)")
    return "\n".join(rows)
