"""A worker's Prometheus metrics and its health, served by Faust's web server.

One registry per worker (no global state): counters the agents bump as
they go, and gauges read from the partition states when `/metrics` is
scraped (graph sizes, consumer lag, recovery). `/health` answers 200 once
every assigned graph-events partition has caught up with the log, 503
before (a readiness probe).
"""

from __future__ import annotations

from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("emgas_turns_extracted", "Turns extracted into graph events", registry=r)
        self.applied = Counter("emgas_graph_events", "Graph events applied, by type and outcome", ["type", "outcome"], registry=r)
        self.dead_letters = Counter("emgas_dead_letters", "Messages sent to the dead-letter topic, by reason", ["topic", "reason"], registry=r)
        self.queries = Counter("emgas_queries", "Requests answered, by type and result", ["type", "result"], registry=r)
        self.expired = Counter(
            "emgas_queries_expired", "Queries not answered because they were older than EMGAS_QUERY_TIMEOUT_S when "
            "taken (their clients had given up)", registry=r,
        )
        self.covered = Counter(
            "emgas_queries_covered", "Queries answered (read-only) for a partition whose new owner was catching up",
            registry=r,
        )
        self.answered_before = Counter(
            "emgas_queries_answered_before", "Queries not answered because the partition's previous owner had "
            "answered them (it said so when it stopped)", registry=r,
        )
        self.latency = Histogram(
            "emgas_query_seconds", "Time to answer an activation query inside the worker", registry=r,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
        )
        self.emitted = Counter("emgas_dynamics_events_emitted", "Decay ticks, consolidations and retrievals appended", ["type"], registry=r)
        self.graphs = Gauge("emgas_graphs", "Graph versions held, per partition", ["partition"], registry=r)
        self.concepts = Gauge("emgas_concepts", "Live concepts, per partition", ["partition"], registry=r)
        self.edges = Gauge("emgas_edges", "Edges, per partition", ["partition"], registry=r)
        self.passages = Gauge("emgas_passages", "Passages, per partition", ["partition"], registry=r)
        self.applied_offset = Gauge("emgas_applied_offset", "Offset of the last graph event applied, per partition", ["partition"], registry=r)
        self.committed_offset = Gauge("emgas_committed_offset", "Offset the partition's stored state reflects (its last commit)", ["partition"], registry=r)
        self.lag = Gauge("emgas_consumer_lag", "Graph events in the log not yet applied, per partition", ["partition"], registry=r)
        self.recovering = Gauge("emgas_partitions_recovering", "Assigned partitions still catching up with the log", registry=r)
        self.log_mismatches = Counter(
            "emgas_log_mismatches", "Partitions whose log was not the one their state reflects, by kind and action",
            ["partition", "kind", "action"], registry=r,
        )
        self.snapshots_restored = Counter("emgas_snapshots_restored", "Graphs restored from a snapshot in the log by recovery", registry=r)
        self.group_rejoins = Counter(
            "emgas_group_rejoins", "Times the worker rejoined its consumer group by itself, by reason", ["reason"], registry=r,
        )
        self.ready = Gauge("emgas_partitions_ready", "Assigned partitions caught up with the log", registry=r)

    def render(self, refresh: Callable[["Metrics"], None]) -> tuple[bytes, str]:
        """The exposition text (after `refresh` set the gauges) and its content type."""
        refresh(self)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def register_pages(app: Any, metrics: Metrics, refresh: Callable[[Metrics], None], health: Callable[[], dict]) -> None:
    """`/metrics` and `/health` on the worker's web server."""

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        body, content_type = metrics.render(refresh)
        return web.bytes(body, content_type=content_type.split(";")[0])

    @app.page("/health")
    async def health_page(web: Any, request: Any) -> Any:
        state = health()
        return web.json(state, status=200 if state["ready"] else 503)
