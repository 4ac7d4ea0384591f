"""The agent-facing API (`streams.interfaces.memory`) against a live worker on Apache Kafka."""

import pytest

from emgas.streams.errors import BrokerError, ConfigError
from emgas.streams.interfaces.memory import AsyncMemory, Memory, MemoryApiError
from emgas.streams.settings import Settings
from tests.support.live import run

pytestmark = pytest.mark.integration

DOG = "I adopted a greyhound called Pretzel last week"
BEACH = "Pretzel loves running on the beach at Cromer"
WORK = "The quarterly report for the Lisbon office is due on Friday"


def test_add_search_delete_search(pipeline):
    with Memory(graph="mem-sync", settings=pipeline) as memory:
        dog, beach, work = (memory.add(text)[0] for text in (DOG, BEACH, WORK))
        found = memory.search("greyhound Pretzel", k=3)
        assert found.hits[0].turn_id == dog and found.hits[0].score > 0
        assert any(text.lower() == "greyhound" for text, _ in found.concepts)
        held = memory.get(work)
        assert held is not None and held.text == WORK and "report" in held.concepts
        memory.delete(dog)
        assert memory.get(dog) is None
        after = memory.search("greyhound Pretzel", k=3)
        assert dog not in [h.turn_id for h in after.hits] and beach in [h.turn_id for h in after.hits]
        assert memory.stats().turns == 2
        nothing = memory.search("What about the zorbulax?", k=3)
        assert nothing.hits == [] and nothing.empty == "no_seeds" and nothing.unmatched == ["zorbulax"]
        # The forgotten turn's words are erased from the log: its replay never held them.
        assert memory.history("greyhound") == []
        assert [s.kind for s in memory.history("report")][0] == "created"


def test_messages_become_turns_in_order_and_graphs_stay_apart(pipeline):
    async def scenario():
        async with AsyncMemory(settings=pipeline) as memory:
            ids = await memory.add([{"role": "user", "content": DOG}, {"role": "assistant", "content": "Lovely!"}],
                                   graph="mem-a")
            first, second = [await memory.get(i, graph="mem-a") for i in ids]
            assert (first.speaker, second.speaker) == ("user", "assistant") and first.timestamp < second.timestamp
            with pytest.raises(MemoryApiError) as refused:
                await memory.search("greyhound", graph="mem-nobody")
            assert refused.value.code == "graph_not_found"
            with pytest.raises(MemoryApiError) as unnamed:
                await memory.search("greyhound")
            assert unnamed.value.code == "no_graph"
            await memory.delete_all(graph="mem-a")
            assert await memory.get(ids[0], graph="mem-a") is None

    run(scenario())


def test_no_reachable_broker_is_a_clear_error(tmp_path):
    with pytest.raises(BrokerError, match="cannot reach Kafka at 127.0.0.1:9"):
        Memory(graph="g", settings=Settings(home=tmp_path, broker="127.0.0.1:9", query_timeout_s=2))
    with pytest.raises(ConfigError, match="no broker configured"):
        Memory(graph="g", settings=Settings(home=tmp_path))
