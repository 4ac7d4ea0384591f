"""Replay on Apache Kafka: every graph is a function of the log.

The same turns are ingested one at a time, in large batches, twice over,
and on 1 and 3 partitions (2 workers: test_rebalance.py; a crash:
test_crash.py); every live graph must have the digest of a graph built
in-process from the same turns and of a from-scratch replay. Graph ids are namespaced per scenario (the
digest does not include the graph id), so one broker hosts several.
"""

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from emgas.processors.events import ActivationReply, Turn
from emgas.replay.fold import Selection
from emgas.replay.reader import FEW_RECORDS_BYTES
from emgas.streams.interfaces.admin import derive_from_turns, replay, switch_version
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.kafka.reader import log_reader
from emgas.tools.harness import demo_turns
from emgas.testing import turns_per_graph, wait_for_turns
from tests.support.live import (
    digests_by_graph, live_digests, live_pipeline, offline_digests, publish_and_wait, run,
)

pytestmark = pytest.mark.integration
GOLDEN = Path(__file__).parents[1] / "golden"


def renamed(turns: list[Turn], prefix: str) -> list[Turn]:
    return [t.model_copy(update={"graph_id": prefix + t.graph_id}) for t in turns]


def stripped(digests: dict[str, str], prefix: str) -> dict[str, str]:
    return {g.removeprefix(prefix): d for g, d in digests.items() if g.startswith(prefix)}


def first_half_of_alice() -> list[Turn]:
    alice = sorted((t for t in demo_turns() if t.graph_id == "alice"), key=lambda t: t.timestamp)
    return alice[: len(alice) // 2]


async def ingest_one_at_a_time(settings, turns: list[Turn]) -> None:
    """Each turn is applied before the next one is published."""
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {t.graph_id: 0 for t in turns}, deadline_s=120)
        for i, turn in enumerate(turns):
            await client.publish([turn])
            await wait_for_turns(client, turns_per_graph(turns[: i + 1]), deadline_s=60)


def replay_all(settings, state_dir: Path, **selection):
    return run(replay(settings, state_dir, selection.get("graph_id"), Selection(**selection), verify=False))


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """3 partitions, 1 worker: the same conversation one at a time, in one
    batch, published twice, and only its first half."""
    turns = demo_turns()
    with live_pipeline(tmp_path_factory.mktemp("three"), partitions=3) as live:
        run(ingest_one_at_a_time(live.settings, renamed(turns, "one-")))
        batch = renamed(turns, "batch-")
        run(publish_and_wait(live.settings, batch, len(batch), turns_per_graph(batch)))
        twice = renamed(turns, "dup-") + renamed(turns, "dup-")
        run(publish_and_wait(live.settings, twice, len(twice), turns_per_graph(twice)))
        half = renamed(first_half_of_alice(), "half-")
        run(publish_and_wait(live.settings, half, len(half), turns_per_graph(half)))
        yield live


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """1 partition, 1 worker, one batch."""
    turns = renamed(demo_turns(), "batch-")
    with live_pipeline(tmp_path_factory.mktemp("single"), partitions=1) as live:
        run(publish_and_wait(live.settings, turns, len(turns), turns_per_graph(turns)))
        yield live


def test_batching_and_partitions_give_identical_digests(three, single):
    built_offline = offline_digests(demo_turns(), three.settings)
    assert set(built_offline) == {"alice", "bob"}
    assert stripped(digests_by_graph(run(live_digests(three.settings))), "one-") == built_offline
    assert stripped(digests_by_graph(run(live_digests(three.settings))), "batch-") == built_offline
    assert stripped(digests_by_graph(run(live_digests(single.settings))), "batch-") == built_offline


@pytest.mark.parametrize("name", ["three", "single"])
def test_live_graphs_equal_a_replay_from_scratch(name, request, tmp_path):
    live = request.getfixturevalue(name)
    result = run(replay(live.settings, tmp_path / "rebuilt", None, Selection(), verify=True))
    assert result.differences == []
    assert {(d.graph_id, d.digest) for d in result.digests} == {
        (g, d) for g, d in digests_by_graph(run(live_digests(live.settings))).items()
    }


def test_partitions_folded_side_by_side_give_the_digests_of_one_process(three, tmp_path):
    alone = run(replay(three.settings, tmp_path / "alone", None, Selection(), verify=False, processes=1))
    side_by_side = run(replay(three.settings, tmp_path / "side", None, Selection(), verify=True, processes=3))
    assert (alone.report.processes, side_by_side.report.processes) == (1, 3)
    assert side_by_side.differences == []
    assert side_by_side.digests == alone.digests
    assert side_by_side.report.ranges == alone.report.ranges
    assert side_by_side.report.counts == alone.report.counts
    assert sorted(p.name for p in (tmp_path / "side").iterdir()) == ["partition-0", "partition-1", "partition-2"]


def test_every_turn_published_twice_changes_the_graph_once(three):
    live = digests_by_graph(run(live_digests(three.settings)))
    assert stripped(live, "dup-") == stripped(live, "batch-")


def test_as_of_the_middle_equals_a_graph_that_saw_only_the_first_half(three, tmp_path):
    middle = first_half_of_alice()[-1].timestamp
    result = replay_all(three.settings, tmp_path / "as-of", graph_id="batch-alice", as_of=middle)
    [rebuilt] = result.digests
    assert rebuilt.sections["passages"].count == len(first_half_of_alice())
    assert rebuilt.digest == digests_by_graph(run(live_digests(three.settings)))["half-alice"]


def test_to_offset_stops_at_that_offset(three, tmp_path):
    result = replay_all(three.settings, tmp_path / "to-offset", graph_id="half-alice", to_offset=0)
    (start, stop), = result.report.ranges.values()
    assert (start, stop) == (0, 1) and result.report.counts.read == 1


def test_golden_first_version_log_applies_live_and_replays_to_the_expected_digests(three, tmp_path):
    lines = (GOLDEN / "graph-events-v1.jsonl").read_bytes().splitlines()
    expected = json.loads((GOLDEN / "expected-digests.json").read_text())

    async def produce() -> None:
        async with MemoryClient(three.settings) as client:
            for line in lines:  # the raw v1 bytes, as an old version wrote them
                graph = json.loads(line)["graph_id"]
                await client._producer.send_and_wait(three.settings.graph_events_topic, line, key=graph.encode())
            await wait_for_turns(client, {"alice": 26, "bob": 8}, deadline_s=60)

    run(produce())
    live = digests_by_graph(run(live_digests(three.settings)))
    assert {g: live[g] for g in expected} == expected
    rebuilt = replay_all(three.settings, tmp_path / "golden", graph_id="alice")
    assert {d.graph_id: d.digest for d in rebuilt.digests} == {"alice": expected["alice"]}


def test_from_turns_builds_a_new_version_served_after_the_switch(three):
    settings = three.settings

    async def scenario() -> None:
        async with MemoryClient(settings) as client:

            async def versions() -> dict[int, tuple[bool, int]]:
                [reply] = await client.digests("batch-bob")
                return {d.version: (d.active, d.sections["passages"].count) for d in reply.graphs}

            async def until(wanted: dict[int, tuple[bool, int]]) -> None:
                deadline = asyncio.get_running_loop().time() + 30
                while (got := await versions()) != wanted:
                    assert asyncio.get_running_loop().time() < deadline, got
                    await asyncio.sleep(0.05)

            derived = await derive_from_turns(settings, "batch-bob")
            assert derived.versions == {"batch-bob": 2} and derived.turns == {"batch-bob": 8}
            await until({1: (True, 8), 2: (False, 8)})
            await switch_version(settings, "batch-bob", 2, datetime.now(timezone.utc))
            # The re-derivation that follows a switch adds nothing twice.
            await until({1: (False, 8), 2: (True, 8)})
            reply = await client.ask("batch-bob", "marathon training")
            assert isinstance(reply, ActivationReply) and reply.stats.turns == 8
            [digests] = await client.digests("batch-bob")
            v1, v2 = sorted(digests.graphs, key=lambda d: d.version)
            assert v1.digest == v2.digest  # same turns, same extractor: same content

    run(scenario())


def test_a_read_left_early_neither_stops_nor_shortens_the_next(single):
    """Recovery leaves reads early (a log's first record, the last checkpoint)
    and reads a few records with small fetches; the reader's next read of
    the same partition must still get every record of its range."""
    topic = single.settings.graph_events_topic

    async def reads() -> tuple[list[int], list[int], list[int], list[int]]:
        async with log_reader(single.settings) as reader:
            _, end = (await reader.bounds(topic, [0]))[0]
            async for batch in reader.read(topic, 0, 0, 5, FEW_RECORDS_BYTES):
                first = [r.offset for r in batch]
                break  # left early, as `first_log_started` does
            tail = [r.offset async for b in reader.read(topic, 0, end - 7, end) for r in b]
            few = [r.offset async for b in reader.read(topic, 0, 2, 9, FEW_RECORDS_BYTES) for r in b]
            whole = [r.offset async for b in reader.read(topic, 0, 0, end) for r in b]
        return first, tail, few, whole

    first, tail, few, whole = run(reads())
    assert first == [0, 1, 2, 3, 4][:len(first)] and first
    assert len(whole) > 9 and whole == sorted(set(whole))
    assert tail == [o for o in whole if o >= whole[-1] - 6]
    assert few == [o for o in whole if 2 <= o < 9]
