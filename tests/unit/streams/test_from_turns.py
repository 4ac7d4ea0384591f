"""`replay --from-turns` says when the turns topic no longer holds every turn a live graph was built from."""

import pytest

from emgas.processors.events import ErrorReply, StatsReply
from emgas.streams.interfaces import admin


class Client:
    def __init__(self, live: dict[str, int]) -> None:
        self.live = live

    async def stats(self, graph_id: str, top: int = 10, timeout_s: float | None = None):
        if graph_id not in self.live:
            return ErrorReply(request_id="r", graph_id=graph_id, code="graph_not_found", message="none")
        return StatsReply(request_id="r", graph_id=graph_id, version=1, turns=self.live[graph_id], concepts=1,
                          edges=0, passages=1, topics=0, top_concepts=())


@pytest.mark.parametrize("found, live, short", [
    ({"alice": 2}, {"alice": 40}, {"alice": (2, 40)}),  # retention dropped 38 of alice's turns
    ({"alice": 40}, {"alice": 40}, {}),
    ({"alice": 41}, {"alice": 40}, {}),  # a forgotten turn's record is still in the topic
    ({"bob": 3}, {}, {}),  # no live graph: nothing to compare with
])
async def test_a_graph_the_turns_topic_holds_only_part_of_is_named(found, live, short):
    assert await admin._short_of_the_live_graphs(Client(live), found) == short  # type: ignore[arg-type]
