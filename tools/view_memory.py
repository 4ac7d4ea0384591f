"""Memory of loaded graph views per turn and per edge, for the capacity model.

`python -m emgas.tools.view_memory [TURNS]` folds TURNS synthetic
LoCoMo-shaped turns (`tools.synthetic`, as `emgas bench`'s fold figure)
into a RocksDB state, opens it again, and measures with tracemalloc what
loading each graph's view allocates: in all, per edge, per turn, and the
adjacency's own share (`GraphView.resident_bytes`). Prints JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

from emgas.processors.graph import GraphParams
from emgas.state.projector import PartitionState
from emgas.state.rocks import RocksStore
from emgas.tools.bench.core import decoded_records, fold_into, synthetic_log
from emgas.tools.synthetic import conversations


def view_memory(turns: int) -> dict[str, Any]:
    synthetic = conversations(turns)
    params = GraphParams()
    graphs = sorted({t.graph_id for t in synthetic})
    with tempfile.TemporaryDirectory(prefix="emgas-view-memory-") as tmp:
        state = PartitionState(RocksStore(Path(tmp)), params)
        fold_into(state, decoded_records(synthetic_log(synthetic, params)))
        state.close()
        state = PartitionState(RocksStore(Path(tmp)), params)
        allocated = edges = held = adjacency = 0
        for graph in graphs:
            tracemalloc.start()
            view = state.view(graph)
            allocated += tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            assert view is not None
            edges += view.edges
            held += view.turns
            adjacency += view.resident_bytes()
        state.close()
    return {
        "turns": held, "graphs": len(graphs), "edges": edges, "view_bytes": allocated,
        "view_bytes_per_turn": round(allocated / held), "view_bytes_per_edge": round(allocated / edges, 1),
        "adjacency_bytes_per_edge": round(adjacency / edges, 1),
        "other_bytes_per_turn": round((allocated - adjacency) / held),
    }


if __name__ == "__main__":
    print(json.dumps(view_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 8000), indent=2))
