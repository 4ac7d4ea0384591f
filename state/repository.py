"""Typed reads and atomic writes of graph state over a `PartitionStore`."""

from __future__ import annotations

import json

from processors.graph import ConceptState, Passage, TurnDelta
from state import keys
from state.store import PartitionStore

NO_OFFSET = -1


class GraphRepository:
    """All graphs of one partition, and the log offset their state reflects."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store

    def applied_offset(self) -> int:
        """Offset of the last graph event applied here; NO_OFFSET if none."""
        raw = self.store.get(keys.OFFSET)
        return json.loads(raw)["offset"] if raw else NO_OFFSET

    def graph_ids(self) -> list[str]:
        return [k[len(keys.REGISTRY):].decode() for k, _ in self.store.scan(keys.REGISTRY)]

    def has_turn(self, graph_id: str, turn_id: str) -> bool:
        return self.store.get(keys.passage(graph_id, turn_id)) is not None

    def turns(self, graph_id: str) -> int:
        raw = self.store.get(keys.graph_meta(graph_id))
        return json.loads(raw)["turns"] if raw else 0

    def concepts(self, graph_id: str, ids: list[str]) -> dict[str, ConceptState]:
        raws = self.store.multi_get([keys.concept(graph_id, cid) for cid in ids])
        return {
            cid: ConceptState.model_validate_json(raw)
            for cid, raw in zip(ids, raws)
            if raw is not None
        }

    def passages(self, graph_id: str, turn_ids: list[str]) -> dict[str, Passage]:
        raws = self.store.multi_get([keys.passage(graph_id, t) for t in turn_ids])
        return {
            t: Passage.model_validate_json(raw) for t, raw in zip(turn_ids, raws) if raw is not None
        }

    def mark_offset(self, offset: int) -> None:
        """Record that the event at `offset` was seen but changed nothing."""
        self.store.write({keys.OFFSET: _offset_value(offset)})

    def write(self, delta: TurnDelta, offset: int) -> None:
        """Write one turn's delta and the log offset it came from, atomically."""
        g = delta.graph_id
        turn_id = delta.passage.turn_id
        pair_keys = [keys.pair(g, a, b) for a, b in delta.pairs]
        old_pairs = self.store.multi_get(pair_keys)
        batch: dict[bytes, bytes | None] = {
            keys.OFFSET: _offset_value(offset),
            keys.registry(g): b"",
            keys.graph_meta(g): json.dumps({"turns": self.turns(g) + 1}).encode(),
            keys.passage(g, turn_id): delta.passage.model_dump_json().encode(),
        }
        for concept in delta.concepts:
            batch[keys.concept(g, concept.id)] = concept.model_dump_json().encode()
            batch[keys.concept_passage(g, concept.id, turn_id)] = b""
        for key, old in zip(pair_keys, old_pairs):
            batch[key] = keys.encode_count(keys.decode_count(old) + 1)
        self.store.write(batch)


def _offset_value(offset: int) -> bytes:
    return json.dumps({"offset": offset}).encode()
