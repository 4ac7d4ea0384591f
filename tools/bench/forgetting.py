"""The cost of forgetting on request: a forget re-folds the graph."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


from emgas.testing import LocalLog
from emgas.state.rocks import RocksStore
from emgas.processors.graph import GraphParams, GraphRef
from emgas.tools.figures import figure


def forget_figures(days: int, repeats: int) -> dict[str, Any]:
    from emgas.processors.events import Forget, SnapshotStarted
    from emgas.tools.simulation import GRAPH, Stream, turns

    stream = Stream(days=days)
    held = list(turns(stream))
    # Snapshots every tenth of the history, the latest nine tenths into it:
    # sparser than the default policy's rounds on this graph (about one per
    # MB of its events, `EMGAS_SNAPSHOT_MIN_BYTES`: some 14 over its 14 MB).
    tenths = [len(held) * k // 10 for k in range(11)]
    with tempfile.TemporaryDirectory(prefix="emgas-bench-forget-") as tmp:
        log = LocalLog(GraphParams(), RocksStore(Path(tmp)))
        for start, end in zip(tenths, tenths[1:]):
            log.extend(held[start:end])
            if end < len(held):
                log.append(SnapshotStarted(graph_id=GRAPH, reason="policy", timestamp=held[end - 1].timestamp))
        at = log.state.repo.meta(GraphRef(GRAPH, 1)).clock

        def forget_ms(turn: int, request: str) -> float:
            started = time.perf_counter()
            log.append(Forget(graph_id=GRAPH, request_id=request, timestamp=at, turn_ids=(f"t{turn}",)))
            log.state.commit()
            return (time.perf_counter() - started) * 1000

        # After the latest snapshot first: forgetting a turn drops the points that hold it.
        recent = [forget_ms(len(held) - 1 - i, f"recent-{i}") for i in range(repeats)]
        middle = len(held) // 2  # a turn from the middle of the stream
        timings = [forget_ms(middle + i, f"bench-{i}") for i in range(repeats)]
        ref = GraphRef(GRAPH, 1)
        journal = sum(len(entry.event) for entry in log.state.repo.journal(ref))
        turns_held = log.state.repo.meta(ref).turns
        log.state.close()
    return {
        "forget_ms": figure(timings, 1), "forget_after_snapshot_ms": figure(recent, 1),
        "forget_graph_turns": turns_held, "journal_bytes_per_turn": round(journal / turns_held),
    }


# -- taking over a partition: histories of one graph, with and without snapshots --
