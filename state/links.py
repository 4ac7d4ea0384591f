"""A graph version's concept -> passage links, kept in its passages.

A passage links every concept its turn mentioned, unless a decay tick
unlinked one (it pruned the concept; an `unlinked` record says so), so a
turn writes no record per link (`keys`: format 5). Whoever needs the links
as a list (digests, snapshots, which carry one record per link as in
format 4) reads them here: every (concept, turn) link of a version, in the
order of the records of format 4 (by concept, then turn).
"""

from __future__ import annotations

import orjson

from emgas.processors.graph import GraphRef
from emgas.state import keys
from emgas.state.store import PartitionStore


def of_version(store: PartitionStore, ref: GraphRef) -> list[tuple[str, str]]:
    """Every (concept, turn) link of `ref`, by concept then turn (as bytes, the old records' key order)."""
    unlinked = unlinked_of(store, ref)
    prefix = keys.section(ref, b"t")
    found = []
    for key, raw in store.scan(prefix):
        turn_id = key[len(prefix):].decode()
        gone = unlinked.get(turn_id, ())
        found += [(cid, turn_id) for cid in orjson.loads(raw)["concept_ids"] if cid not in gone]
    found.sort(key=_key_order)
    return found


def unlinked_of(store: PartitionStore, ref: GraphRef) -> dict[str, set[str]]:
    """Per turn, the concepts its passage no longer links."""
    prefix = keys.section(ref, b"u")
    gone: dict[str, set[str]] = {}
    for key, _ in store.scan(prefix):
        turn_id, cid = keys.split_tail(key, prefix)
        gone.setdefault(turn_id, set()).add(cid)
    return gone


def _key_order(link: tuple[str, str]) -> tuple[bytes, bytes]:
    return link[0].encode(), link[1].encode()
