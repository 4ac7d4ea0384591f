"""The graph viewer: a page served by the worker, and the JSON it reads.

- `/viewer`: the page (`streams/runtime/web/viewer.html`, Cytoscape vendored from
  npm under `streams/runtime/web/vendor`, so it works offline);
- `/api/graphs`: the graphs this worker holds (on caught-up partitions);
- `/api/graph?graph=G&limit=N`: its N most mentioned concepts (size: base
  activation) and the strongest edges among them;
- `/api/query?graph=G&q=TEXT`: a query that does not reinforce, with which
  concepts fired at each iteration and, per passage returned, the concepts
  that led to it.

Reads only: the viewer never changes a graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from emgas.processors.association import outgoing_weights
from emgas.processors.errors import QueryError
from emgas.processors.events import ActivationQuery, QueryParams
from emgas.state.projector import PartitionState
from emgas.state.view import GraphView
from emgas.service.retrieval import answer
from emgas.streams.settings import Settings

WEB = Path(__file__).parent / "web"
VENDORED = "cytoscape-3.34.4.min.js"

States = Callable[[], list[PartitionState]]


def graph_list(states: list[PartitionState]) -> list[dict[str, Any]]:
    return [
        {"graph": ref.graph_id, "version": ref.version, "concepts": v.concepts, "edges": v.edges, "passages": len(v.place_of)}
        for state in states
        for ref, v in sorted(state.views.items())
        if state.repo.active_version(ref.graph_id) == ref.version
    ]


def _find(states: list[PartitionState], graph_id: str) -> tuple[PartitionState, GraphView]:
    for state in states:
        view = state.view(graph_id)
        if view is not None:
            return state, view
    raise QueryError("graph_not_found", f"graph {graph_id!r} is not held by this worker")


def graph_picture(states: list[PartitionState], graph_id: str, limit: int, settings: Settings) -> dict[str, Any]:
    """The `limit` most mentioned concepts and the strongest edges among them."""
    state, view = _find(states, graph_id)
    chosen = view.most_mentioned(limit)
    ids = [view.ids[i] for i in chosen]
    records = state.repo.concepts(view.ref, ids)
    inside = set(chosen)
    counts, n = view.counts, float(view.turns)
    edges = []
    for i in chosen:
        idx, pair = view.neighbour_counts(i)
        weights = outgoing_weights(settings.activation.weight, False, pair, counts[i], counts[idx], n)
        for j, w in zip(idx.tolist(), weights.tolist()):
            if i < j and j in inside and w > 0:
                edges.append({"source": view.ids[i], "target": view.ids[j], "weight": round(w, 4)})
    edges.sort(key=lambda e: (-e["weight"], e["source"], e["target"]))
    return {
        "graph": graph_id,
        "nodes": [
            {"id": c, "label": records[c].text, "count": records[c].count, "activation": round(records[c].base_activation, 4)}
            for c in ids
        ],
        "edges": edges[: 3 * limit],
    }


def traced_query(states: list[PartitionState], graph_id: str, text: str, settings: Settings) -> dict[str, Any]:
    """Answer `text` without reinforcing; what fired at each iteration, and why each passage came back."""
    state, view = _find(states, graph_id)
    trace: list[tuple[np.ndarray, np.ndarray]] = []
    query = ActivationQuery(request_id="viewer", graph_id=graph_id, text=text, reinforce=False, params=QueryParams())
    reply = answer(state, query, settings.activation, settings.extraction, lambda: 0.0, trace)
    concept_ids = [c.id for c in reply.concepts]
    linked = {c: set(view.passage_ids[view.index[c]]) for c in concept_ids}
    return {
        "graph": graph_id,
        "seeds": list(reply.seeds),
        "iterations": [
            {"fired": [{"id": view.ids[int(i)], "activation": round(float(a), 4)} for i, a in zip(nodes, values) if i < view.size]}
            for nodes, values in trace
        ],
        "concepts": [{"id": c.id, "label": c.text, "activation": round(c.activation, 4), "score": round(c.score, 4)} for c in reply.concepts],
        "passages": [
            {
                "turn_id": p.turn_id, "speaker": p.speaker, "text": p.text, "score": round(p.score, 4),
                "because": [c for c in concept_ids if p.turn_id in linked[c]] or ["(a neighbouring turn in the session)"],
            }
            for p in reply.passages
        ],
    }


def register_viewer(app: Any, settings: Settings, ready_states: States) -> None:
    page = (WEB / "viewer.html").read_text()
    script = (WEB / "vendor" / VENDORED).read_bytes()

    @app.page("/viewer")
    async def viewer(web: Any, request: Any) -> Any:
        return web.html(page)

    @app.page("/viewer/cytoscape.min.js")
    async def vendored(web: Any, request: Any) -> Any:
        return web.bytes(script, content_type="application/javascript")

    @app.page("/api/graphs")
    async def graphs(web: Any, request: Any) -> Any:
        return web.json(graph_list(ready_states()))

    @app.page("/api/graph")
    async def graph(web: Any, request: Any) -> Any:
        return _json_or_error(web, lambda: graph_picture(
            ready_states(), request.query.get("graph", ""), min(int(request.query.get("limit", "120")), 1000), settings,
        ))

    @app.page("/api/query")
    async def query(web: Any, request: Any) -> Any:
        return _json_or_error(web, lambda: traced_query(
            ready_states(), request.query.get("graph", ""), request.query.get("q", ""), settings,
        ))


def _json_or_error(web: Any, build: Callable[[], dict[str, Any]]) -> Any:
    try:
        return web.json(build())
    except QueryError as err:
        return web.json({"error": err.code, "message": err.message}, status=404)
    except ValueError as err:
        return web.json({"error": "bad_request", "message": str(err)}, status=400)
