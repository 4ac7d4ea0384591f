"""Builders shared by the tests."""

from datetime import datetime, timedelta, timezone

from emgas.processors.dynamics import DAY_S, DecayParams
from emgas.processors.events import Concept, TurnIngested
from emgas.processors.graph import GraphParams

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def ingested(graph: str, turn: str, concepts: dict[str, float], minute: int = 0, text: str | None = None) -> TurnIngested:
    return TurnIngested(
        graph_id=graph, turn_id=turn, speaker="user", text=text or " ".join(concepts),
        timestamp=T0 + timedelta(minutes=minute), language="en", extractor="test",
        concepts=tuple(Concept(id=c, text=c.title(), importance=i) for c, i in concepts.items()),
    )


# Ten times faster than the defaults, so a few simulated weeks tick, prune and consolidate.
FAST = GraphParams(decay=DecayParams(half_life_s=3 * DAY_S, edge_stability_s=3 * DAY_S))
# The words of the forgetting properties' generated turns.
VOCAB = ["kafka", "lag", "rust", "flink", "jvm", "go"]
