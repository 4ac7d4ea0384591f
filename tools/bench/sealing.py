"""What sealing a turn's words costs (`processors.sealing`), in process.

- seal_us_per_turn / open_us_per_turn / read_back_us_per_turn: a worker
  sealing a turn's event (a data key drawn, the batch's keys sealed as a
  set, the event encrypted), a reader opening it (its key set opened, the
  event decrypted), and a worker reading back a turn it sealed (it kept
  the bytes: `KeyRing.remember`);
- ingest_sealed_vs_unsealed: what a worker does with a turn (extraction,
  decoding and the fold into RocksDB, as `core.language_figures` times
  it) over the same with sealing and reading back added, each measured in
  the same repeat; the Kafka side (a key set record per graph and batch,
  `key_topic_bytes_per_turn`) is left out;
- replay_sealed_vs_unsealed: a replay's decoding and fold of the bench's
  synthetic log over the same with opening its sealed turns added (a ring
  holding their keys, as after reading the key topic);
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
    ingest, replay, seal_us, open_us, read_back_us = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="emgas-bench-sealing-") as tmp:
        for i in range(repeats):
            started = time.perf_counter()
            encode_all(synthetic, extraction, tag)
            extract_s = time.perf_counter() - started
            started = time.perf_counter()
            events = [(decode_for_fold(r.value), r) for r in plain]
            fold_s = time.perf_counter() - started + _fold_s(events, Path(tmp) / f"fold-{i}", params)
            # A worker: seals what it extracted and reads it back (`KeyRing.remember`).
            ring, sealed, key_bytes, seal_s = sealed_log(plain, remember=True)
            read_back_s = _opened_s(ring, sealed)
            # A replay: opens every turn with the keys it read.
            ring, sealed, _, _ = sealed_log(plain, remember=False)
            open_s = _opened_s(ring, sealed)
            ingest.append((extract_s + fold_s) / (extract_s + fold_s + seal_s + read_back_s))
            replay.append(fold_s / (fold_s + open_s))
            seal_us.append(seal_s / len(key_bytes) * 1e6)
            open_us.append(open_s / len(key_bytes) * 1e6)
            read_back_us.append(read_back_s / len(key_bytes) * 1e6)
    return {
        "sealing_turns": turns,
        "seal_us_per_turn": figure(seal_us, 2), "open_us_per_turn": figure(open_us, 2),
        "read_back_us_per_turn": figure(read_back_us, 2),
        "ingest_sealed_vs_unsealed": figure(ingest, 3),
        "replay_sealed_vs_unsealed": figure(replay, 3),
        "key_topic_bytes_per_turn": round(statistics.mean(key_bytes), 1),
        "sealed_vs_plain_turn_bytes": round(_bytes(sealed) / _bytes(plain), 3),
    }


def _opened_s(ring: KeyRing, sealed: list[LogRecord]) -> float:
    started = time.perf_counter()
    asyncio.run(ring.open(0, [r.value for r in sealed], lambda k: 0))
    return time.perf_counter() - started


def sealed_log(plain: list[LogRecord], remember: bool, batch: int = 200) -> tuple[KeyRing, list[LogRecord], list[int], float]:
    """The log with each turn sealed as a worker seals it (its keys in one
    key set per graph and batch of `batch` turns), a ring holding the sets
    (and, when `remember`, the bytes sealed, as a worker's ring does), each
    set record's bytes (key and value) per turn, and the seconds the sealing
    took (not finding the turns' ids: a worker has them)."""
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
            if remember:
                ring.remember(envelope.key_id, record.value)
            value = seal(record.value, envelope, data_key, os.urandom(NONCE_BYTES))
            sealed[k] = LogRecord(record.partition, record.offset, record.timestamp_ms, record.key, value)
    return ring, sealed, [sum(set_bytes) // max(1, len(turns))] * len(turns), time.perf_counter() - started


def _bytes(records: list[LogRecord]) -> int:
    """The bytes of the turns' records (sealed or not) of `records`."""
    return sum(len(r.value) for r in records if r.value.startswith((b'{"type":"turn_ingested"', b'{"type":"sealed"')))


def _ratios(rates: dict[str, list[float]]) -> list[float]:
    return [s / u for s, u in zip(rates["sealed"], rates["unsealed"])]


def _no_reader() -> Any:
    raise AssertionError("every key is held: nothing to read")
