"""Typed reads and atomic writes of graph state over a `PartitionStore`."""

from __future__ import annotations

import json

from processors.graph import ConceptState, GraphRef, Passage, TurnDelta
from state import keys
from state.store import PartitionStore

NO_OFFSET = -1
FIRST_VERSION = 1


class GraphRepository:
    """All graphs of one partition, and the log offset their state reflects."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store

    def applied_offset(self) -> int:
        """Offset of the last graph event applied here; NO_OFFSET if none."""
        raw = self.store.get(keys.OFFSET)
        return json.loads(raw)["offset"] if raw else NO_OFFSET

    def graph_refs(self) -> list[GraphRef]:
        """Every graph version held here, in key order."""
        refs = []
        for key, _ in self.store.scan(keys.REGISTRY):
            graph_id, version = keys.split_tail(key, keys.REGISTRY)
            refs.append(GraphRef(graph_id, int(version)))
        return refs

    def active_version(self, graph_id: str) -> int:
        """The version queries and live turns use: the last switched to, else 1."""
        raw = self.store.get(keys.active(graph_id))
        return json.loads(raw)["version"] if raw else FIRST_VERSION

    def has_turn(self, ref: GraphRef, turn_id: str) -> bool:
        return self.store.get(keys.passage(ref, turn_id)) is not None

    def turns(self, ref: GraphRef) -> int:
        raw = self.store.get(keys.graph_meta(ref))
        return json.loads(raw)["turns"] if raw else 0

    def concepts(self, ref: GraphRef, ids: list[str]) -> dict[str, ConceptState]:
        raws = self.store.multi_get([keys.concept(ref, cid) for cid in ids])
        return {
            cid: ConceptState.model_validate_json(raw)
            for cid, raw in zip(ids, raws)
            if raw is not None
        }

    def passages(self, ref: GraphRef, turn_ids: list[str]) -> dict[str, Passage]:
        raws = self.store.multi_get([keys.passage(ref, t) for t in turn_ids])
        return {
            t: Passage.model_validate_json(raw) for t, raw in zip(turn_ids, raws) if raw is not None
        }

    def mark_offset(self, offset: int) -> None:
        """Record that the event at `offset` was seen but changed nothing."""
        self.store.write({keys.OFFSET: _offset_value(offset)})

    def switch_version(self, graph_id: str, version: int, offset: int) -> None:
        """Make `version` the active one, with the offset of the event that said so."""
        self.store.write({
            keys.OFFSET: _offset_value(offset),
            keys.active(graph_id): json.dumps({"version": version}).encode(),
        })

    def write(self, delta: TurnDelta, offset: int) -> None:
        """Write one turn's delta and the log offset it came from, atomically."""
        ref = delta.ref
        turn_id = delta.passage.turn_id
        pair_keys = [keys.pair(ref, a, b) for a, b in delta.pairs]
        old_pairs = self.store.multi_get(pair_keys)
        batch: dict[bytes, bytes | None] = {
            keys.OFFSET: _offset_value(offset),
            keys.registry(ref): b"",
            keys.graph_meta(ref): json.dumps({"turns": self.turns(ref) + 1}).encode(),
            keys.passage(ref, turn_id): delta.passage.model_dump_json().encode(),
        }
        for concept in delta.concepts:
            batch[keys.concept(ref, concept.id)] = concept.model_dump_json().encode()
            batch[keys.concept_passage(ref, concept.id, turn_id)] = b""
        for key, old in zip(pair_keys, old_pairs):
            batch[key] = keys.encode_count(keys.decode_count(old) + 1)
        self.store.write(batch)


def _offset_value(offset: int) -> bytes:
    return json.dumps({"offset": offset}).encode()
