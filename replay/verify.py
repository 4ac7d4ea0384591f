"""Comparing the digests of live graphs with those of a rebuild."""

from __future__ import annotations

from typing import Iterable

from emgas.processors.events import GraphDigest


def _by_ref(digests: Iterable[GraphDigest]) -> dict[tuple[str, int], GraphDigest]:
    return {(d.graph_id, d.version): d for d in digests}


def differences(live: Iterable[GraphDigest], rebuilt: Iterable[GraphDigest]) -> list[str]:
    """One line per difference, naming the graph version and what differs; [] if equal."""
    live_refs, log_refs = _by_ref(live), _by_ref(rebuilt)
    found = []
    for ref in sorted(live_refs.keys() | log_refs.keys()):
        name = f"graph {ref[0]!r} v{ref[1]}"
        a, b = live_refs.get(ref), log_refs.get(ref)
        if a is None:
            found.append(f"{name}: in the log but not in the live state")
        elif b is None:
            found.append(f"{name}: in the live state but not in the log")
        else:
            found += [f"{name}: {line}" for line in _graph_differences(a, b)]
    return found


def _graph_differences(live: GraphDigest, log: GraphDigest) -> list[str]:
    lines = []
    for section in sorted(live.sections.keys() | log.sections.keys()):
        a, b = live.sections.get(section), log.sections.get(section)
        if a is None or b is None or a.digest != b.digest:
            lines.append(
                f"{section} differ (live: {a.count if a else 'none'} records, "
                f"log: {b.count if b else 'none'} records)"
            )
    if live.active != log.active:
        lines.append(f"active version differs (live: {live.active}, log: {log.active})")
    if not lines and live.digest != log.digest:
        lines.append("digest differs")
    return lines
