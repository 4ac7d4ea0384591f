"""What sealing a turn's words costs (`processors.sealing`), in process.

- seal_us_per_turn / open_us_per_turn: a worker sealing a turn's event (a
  data key drawn, wrapped by the key-encryption key, the event encrypted)
  and a reader opening it (the key unwrapped, the event decrypted);
- ingest_sealed_vs_unsealed: what a worker does with a turn (extraction,
  the event's bytes, decoding and the fold into RocksDB, as
  `core.language_figures` times it) with sealing and opening, over the same
  without, each repeat's pair a second apart; the Kafka side (a key set
  record per graph and batch, `key_topic_bytes_per_turn`) is left out;
- replay_sealed_vs_unsealed: a replay's decoding and fold of the bench's
  synthetic log with its turns sealed (opened by a key ring holding their
  keys, as after reading the key topic) over the same log unsealed;
- sealed_vs_plain_turn_bytes: a sealed turn's record over the turn's
  event unsealed (base64 and the envelope);
- key_topic_bytes_per_turn: the key sets' records (key and value) over
  the turns they hold (the extract agent's batches of 200 turns, a set
  per graph of each).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from emgas.processors.extract import ExtractionParams, encode_all, extractor_id
from emgas.processors.fold_codec import decode_for_fold
from emgas.processors.graph import GraphParams
from emgas.processors.sealing import KEY_BYTES, NONCE_BYTES, Envelope, KeyEncryptionKey, seal, turn_key_id
from emgas.replay.keyring import KeyRing
from emgas.replay.reader import LogRecord
from emgas.tools.bench.core import _fold_s, log_records, synthetic_log
from emgas.tools.figures import figure
from emgas.tools.synthetic import conversations

KEK = KeyEncryptionKey(os.urandom(KEY_BYTES))


def sealing_figures(turns: int, repeats: int) -> dict[str, Any]:
    params, extraction = GraphParams(), ExtractionParams()
    tag = extractor_id(extraction)
    synthetic = conversations(turns)
    plain = log_records(synthetic_log(synthetic, params))
    ring, sealed, key_bytes, seal_s = sealed_log(plain)
    sealed_turns = len(key_bytes)
    ingest: dict[str, list[float]] = {"sealed": [], "unsealed": []}
    replay: dict[str, list[float]] = {"sealed": [], "unsealed": []}
    open_s = []
    with tempfile.TemporaryDirectory(prefix="emgas-bench-sealing-") as tmp:
        for i in range(repeats):
            for kind in ("sealed", "unsealed") if i % 2 == 0 else ("unsealed", "sealed"):
                extract_started = time.perf_counter()
                encode_all(synthetic, extraction, tag)
                extract_s = time.perf_counter() - extract_started
                started = time.perf_counter()
                records = asyncio.run(ring.open(0, sealed, _time)) if kind == "sealed" else plain
                opened_s = time.perf_counter() - started
                events = [(decode_for_fold(r.value), r) for r in records]
                seconds = time.perf_counter() - started + _fold_s(events, Path(tmp) / f"{kind}-{i}", params)
                replay[kind].append(len(plain) / seconds)
                ingest[kind].append(turns / (extract_s + seconds + (seal_s if kind == "sealed" else 0.0)))
                if kind == "sealed":
                    open_s.append(opened_s)
    return {
        "sealing_turns": turns,
        "seal_us_per_turn": round(seal_s / sealed_turns * 1e6, 2),
        "open_us_per_turn": round(statistics.median(open_s) / sealed_turns * 1e6, 2),
        "ingest_sealed_vs_unsealed": figure(_ratios(ingest), 3),
        "replay_sealed_vs_unsealed": figure(_ratios(replay), 3),
        "key_topic_bytes_per_turn": round(statistics.mean(key_bytes), 1),
        "sealed_vs_plain_turn_bytes": round(_bytes(sealed) / _bytes(plain), 3),
    }


def sealed_log(plain: list[LogRecord], batch: int = 200) -> tuple[KeyRing, list[LogRecord], list[int], float]:
    """The log with each turn sealed as a worker seals it (its keys in one
    key set per graph and batch of `batch` turns), a ring holding the sets,
    each set record's bytes (key and value) per turn, and the seconds the
    sealing took (not finding the turns' ids: a worker has them)."""
    ring = KeyRing(KEK, "emgas.keys", _no_reader)
    turns = {}
    for k, record in enumerate(plain):
        if record.value.startswith(b'{"type":"turn_ingested"'):
            event = decode_for_fold(record.value)
            turns[k] = (event.graph_id, event.turn_id, event.timestamp.isoformat())  # type: ignore[union-attr]
    sealed, set_bytes = list(plain), []
    indices = list(turns)
    started = time.perf_counter()
    for at in range(0, len(indices), batch):
        tag = os.urandom(6).hex()
        sets: dict[bytes, dict[str, bytes]] = {}
        made = []
        for n, k in enumerate(indices[at:at + batch]):
            graph_id, turn_id, timestamp = turns[k]
            envelope = Envelope(graph_id, turn_key_id(turn_id, tag, n), "turn_ingested", timestamp)
            data_key = os.urandom(KEY_BYTES)
            sets.setdefault(envelope.key, {})[envelope.key_id] = data_key
            made.append((k, envelope, data_key))
        for key, keys in sets.items():
            value = KEK.seal_keys(key, keys, os.urandom(NONCE_BYTES))
            ring.add(0, key, value)
            set_bytes.append(len(key) + len(value))
        for k, envelope, data_key in made:
            record = plain[k]
            value = seal(record.value, envelope, data_key, os.urandom(NONCE_BYTES))
            sealed[k] = LogRecord(record.partition, record.offset, record.timestamp_ms, record.key, value)
    return ring, sealed, [sum(set_bytes) // max(1, len(turns))] * len(turns), time.perf_counter() - started


def _bytes(records: list[LogRecord]) -> int:
    """The bytes of the turns' records (sealed or not) of `records`."""
    return sum(len(r.value) for r in records if r.value.startswith((b'{"type":"turn_ingested"', b'{"type":"sealed"')))


def _ratios(rates: dict[str, list[float]]) -> list[float]:
    return [s / u for s, u in zip(rates["sealed"], rates["unsealed"])]


def _time(record: LogRecord) -> int:
    return record.timestamp_ms


def _no_reader() -> Any:
    raise AssertionError("every key is held: nothing to read")
