"""A graph version's concept -> passage links, kept in its passages.

A passage links every concept its turn mentioned, unless a decay tick
unlinked one (it pruned the concept; an `unlinked` record says so), so a
turn writes no record per link (`keys`: format 5). A digest, which renders
one line per link as format 4 had one record per link, groups them here
(by concept, then turn: the records' order); snapshots, which carry link
records, make them from the records' bytes (`state.snapshots.as_links`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from emgas.processors.graph import GraphRef
from emgas.state import keys
from emgas.state.store import PartitionStore


def turns_by_concept(
    passages: Iterable[tuple[str, Iterable[str]]], unlinked: Mapping[str, set[str]],
) -> dict[str, list[str]]:
    """Per concept, the turns whose passages (turn id, concept ids, in key
    order: `state.digest.link_lines` reads them so) link it,
    in the order the passages come: in key order, each concept's turns are
    in the links' key order, and so are the concepts once sorted (a str's
    code points sort as its UTF-8 bytes do)."""
    by_concept: defaultdict[str, list[str]] = defaultdict(list)
    for turn_id, concept_ids in passages:
        gone = unlinked.get(turn_id)
        for cid in concept_ids:
            if gone is None or cid not in gone:
                by_concept[cid].append(turn_id)
    return dict(by_concept)  # not a defaultdict: a concept looked up that no passage links is an error, not a new list


def unlinked_of(store: PartitionStore, ref: GraphRef) -> dict[str, set[str]]:
    """Per turn, the concepts its passage no longer links."""
    prefix = keys.section(ref, b"u")
    gone: dict[str, set[str]] = {}
    for key, _ in store.scan(prefix):
        turn_id, cid = keys.split_tail(key, prefix)
        gone.setdefault(turn_id, set()).add(cid)
    return gone
