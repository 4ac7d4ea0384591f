"""Forgetting reaches the log itself, on Apache Kafka: once a turn is
forgotten and Kafka has compacted its key away, its words are readable
nowhere in the cluster, by a plain consumer, by kcat, or by whoever holds
the key-encryption key and every key record left in the key topic; the
log still replays to the live graphs, and a turn not forgotten is still
read and retrieved."""

import base64
import shutil
import subprocess
import time
import zlib
from datetime import timedelta

import pytest
import zstandard
from aiokafka.admin import AIOKafkaAdminClient

from emgas.processors.codec import decode_graph_event
from emgas.processors.errors import DecodeError
from emgas.processors.events import Snapshot, Turn
from emgas.processors.sealing import SealError, envelope_of, is_sealed, open_sealed
from emgas.replay.fold import Selection
from emgas.replay.reader import LogReader
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings
from emgas.tools.harness import demo_turns
from tests.support.live import live_pipeline, publish_and_wait, run

pytestmark = pytest.mark.integration

GONE, KEPT = "quixoticfjordzebra", "plumbobmeridian"  # words no other turn holds
ERASURE_MS, TURNS_MS = 1_000, 8_000  # the key topic's and the turns topic's bounds, made short
TOPICS = {"key_erasure_ms": ERASURE_MS, "turns_retention_ms": TURNS_MS}
WORKER_ENV = {"EMGAS_KEY_ERASURE_MS": str(ERASURE_MS), "EMGAS_TURNS_RETENTION_MS": str(TURNS_MS)}
# The broker checks retention and compaction every half second, not every 5 minutes and 15 s.
BROKER = {"log.retention.check.interval.ms": "500", "log.cleaner.backoff.ms": "500"}
KCAT = shutil.which("kcat")


async def every_record(settings: Settings) -> dict[str, list[tuple[bytes | None, bytes | None]]]:
    """topic -> (key, value) of every record still in it, read by a plain
    reader (no keys: sealed records stay sealed)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers())
    await admin.start()
    try:
        topics = [t for t in await admin.list_topics() if not t.startswith("__")]
    finally:
        await admin.close()
    found: dict[str, list[tuple[bytes | None, bytes | None]]] = {}
    async with LogReader(settings.bootstrap_servers()) as reader:
        for topic in sorted(topics):
            found[topic] = []
            partitions = await reader.partitions(topic)
            for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
                async for batch in reader.read(topic, partition, start, end):
                    found[topic] += [(r.key, r.value) for r in batch]
    return found


def what_a_key_holder_reads(settings: Settings, records: dict) -> list[str]:
    """The texts someone holding the key-encryption key reads out of the
    topics: every sealed record tried with every key of its id in every
    version of the key sets (superseded ones too, where Kafka has not
    compacted them away), and every snapshot, sealed or not, assembled and
    inflated."""
    kek = settings.kek()
    assert kek is not None
    keys: dict[str, list[bytes]] = {}
    for key, value in records[settings.keys_topic]:
        if key is not None and value is not None and not key.startswith(b"\x00"):
            for key_id, data_key in kek.open_keys(key, value).items():
                keys.setdefault(key_id, []).append(data_key)
    texts, parts = [], {}
    for _, value in records[settings.graph_events_topic]:
        opened = [value]
        if is_sealed(value):
            envelope, data = envelope_of(value)
            opened = [opened for data_key in keys.get(envelope.key_id, [])
                      if (opened := _open(envelope, data, data_key))]
        for raw in opened:
            texts.append(raw.decode())
            try:
                event = decode_graph_event(raw)
            except DecodeError:
                continue
            if isinstance(event, Snapshot):
                parts.setdefault((event.graph_id, event.as_of, event.parts, event.compression), {})[event.part] = event.data
    for (_, _, count, compression), held in parts.items():
        # A snapshot with parts missing: what its first parts hold, decompressed as a stream.
        inflate = zlib.decompressobj() if compression == "zlib" else zstandard.ZstdDecompressor().decompressobj()
        texts.append(_prefix(inflate, held, count).decode(errors="replace"))
    return texts


def _open(envelope, data, data_key) -> bytes | None:  # noqa: ANN001
    try:
        return open_sealed(envelope, data, data_key)
    except SealError:
        return None


def where_readable(word: str, settings: Settings) -> list[str]:
    """Where `word` can still be read in the cluster (empty: nowhere)."""
    records = run(every_record(settings))
    places = [f"{topic} (plain)" for topic, held in records.items()
              if any(word.encode() in (k or b"") + b"\0" + (v or b"") for k, v in held)]
    if any(word in text for text in what_a_key_holder_reads(settings, records)):
        places.append("with the key-encryption key")
    if KCAT is not None:
        for topic in records:
            out = subprocess.run([KCAT, "-b", settings.bootstrap_servers(), "-C", "-t", topic, "-o", "beginning",
                                  "-e", "-q", "-f", "%k\t%s\n"], capture_output=True, timeout=60)
            if word.encode() in out.stdout:
                places.append(f"{topic} (kcat)")
    return places


async def ask(settings: Settings, graph: str, text: str):  # noqa: ANN201
    async with MemoryClient(settings) as client:
        return await client.ask(graph, text, reinforce=False)


def test_a_forgotten_turn_is_unreadable_everywhere_in_kafka_and_replay_stays_exact(tmp_path):
    alice = [t for t in demo_turns() if t.graph_id == "alice"]
    at = alice[-1].timestamp
    gone = Turn(graph_id="alice", turn_id="gone-1", speaker="alice", timestamp=at + timedelta(minutes=1),
                text=f"My old locker code is written under the word {GONE} on a card.")
    kept = Turn(graph_id="alice", turn_id="kept-1", speaker="alice", timestamp=at + timedelta(minutes=2),
                text=f"The {KEPT} telescope on the roof points north.")
    with live_pipeline(tmp_path, partitions=2, workers=0, topics=TOPICS, broker_properties=BROKER) as live:
        live.start("worker-1", env=WORKER_ENV)
        settings = live.settings
        run(publish_and_wait(settings, [*alice, gone, kept], 50, {"alice": len(alice) + 2}))
        out = live.emgas("snapshot", "--graph", "alice", "--wait", "60")
        assert out.returncode == 0, out.stderr

        # Before: the words are in the turns topic as published, and sealed
        # in the log: the key-encryption key's holder reads them in the
        # turn's event and in the snapshot; nobody else does.
        records = run(every_record(settings))
        assert any(GONE.encode() in (v or b"") for _, v in records[settings.turns_topic])
        assert not any(GONE.encode() in (v or b"") for _, v in records[settings.graph_events_topic])
        readable = [t for t in what_a_key_holder_reads(settings, records) if GONE in t]
        assert len(readable) >= 2, "the turn's event and the snapshot"

        out = live.emgas("forget", "--graph", "alice", "--turn", "gone-1", "--json")
        assert out.returncode == 0, out.stderr

        # Kafka rolls and compacts the key topic, and deletes the turns
        # topic's old segment once a later turn rolls it (one a second here).
        deadline, places, filler = time.monotonic() + 150, ["not looked yet"], 0
        while places and time.monotonic() < deadline:
            filler += 1
            run(_publish(settings, Turn(graph_id="alice", turn_id=f"filler-{filler}", speaker="bob",
                                        timestamp=at + timedelta(hours=1, minutes=filler),
                                        text=f"Filler number {filler} about the garden hose.")))
            time.sleep(1)
            places = where_readable(GONE, settings)
        assert not places, f"{GONE!r} still readable: {places}"

        result = run(replay(settings, tmp_path / "rebuilt", None, Selection(), verify=True))
        assert result.differences == [], result.differences
        found = run(ask(settings, "alice", f"{KEPT} telescope"))
        assert "kept-1" in [p.turn_id for p in found.passages]
        assert where_readable(KEPT, settings), "a turn not forgotten is still there"
        after = run(ask(settings, "alice", GONE))
        assert "gone-1" not in [p.turn_id for p in getattr(after, "passages", [])]


async def _publish(settings: Settings, turn: Turn) -> None:
    async with MemoryClient(settings) as client:
        await client.publish([turn])



def _prefix(inflate, held: dict[int, str], count: int) -> bytes:  # noqa: ANN001
    """What the parts from the first on, up to the first one missing (all
    `count` of them when none is), decompress to."""
    packed = b""
    for k in range(count):
        if k not in held:
            break
        packed += base64.b64decode(held[k])
    try:
        return inflate.decompress(packed)
    except (zlib.error, zstandard.ZstdError):
        return b""
