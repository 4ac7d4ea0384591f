"""The soak's reconciliation: what was offered against what the graphs, the
dead-letter topic and the queries show at the end; each failure one line.

Pure: it reads the records the soak gathered (`SoakRecords`) and nothing
else, so a test can hand it a doctored record set and see it fail.

- A turn is *acknowledged* when Kafka acked its publish; only those must be
  applied. A turn whose publish failed or never came back is
  *unacknowledged*: reported (and whether it landed anyway), never counted
  as lost or as applied.
- *Lost*: acknowledged, and its graph holds no passage of it.
- *Applied twice*: a graph counts more applied turns (`stats.turns`, the N
  of its probabilities) than it holds passages; a passage is stored once
  per turn id, so the difference is turns folded more than once.
- Each bad record sent (and acknowledged) must be in the dead-letter topic
  exactly once, with the reason it was built to get; a dead letter for any
  other offset of the turns topic is a valid turn refused.
- Every query attempt ends (a reply or a `QueryTimeout`) within its timeout
  and a grace; none hangs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

ACKED, UNACKED = "acked", "unacked"
QUERY_GRACE_S = 2.0  # past its timeout, an attempt still running counts as hung


@dataclass(frozen=True)
class BadRecord:
    """A malformed record the soak put on the turns topic, and where Kafka put it."""

    kind: str
    reason: str  # the dead-letter reason it must get
    partition: int | None  # None: its publish was not acknowledged
    offset: int | None


@dataclass(frozen=True)
class Attempt:
    """One query sent: when (seconds since the load began), how long until it
    ended, and how: `answered`, `refused:<code>`, `timeout` or `error:<type>`."""

    graph_id: str
    sent_s: float
    took_s: float
    outcome: str


@dataclass
class GraphCounts:
    """What a graph says at the end: passages held and turns counted (N)."""

    held: set[str]  # the offered turn ids it holds a passage of
    passages: int
    turns: int


@dataclass
class SoakRecords:
    offered: dict[str, dict[str, str]]  # graph -> turn id -> ACKED | UNACKED
    graphs: dict[str, GraphCounts]
    digest_differences: list[str]
    bad_sent: list[BadRecord]
    dead_letters: list[tuple[int, int, str]]  # (partition, offset, reason) of the turns topic's dead letters
    attempts: list[Attempt]
    query_timeout_s: float
    not_recovered: list[str] = field(default_factory=list)  # faults after which the system never came back
    verify_error: str | None = None  # why `replay --verify` could not compare the digests


def reconcile(records: SoakRecords) -> dict[str, Any]:
    """The reconciliation's figures and `failures` (empty: everything adds up)."""
    failures: list[str] = []
    figures: dict[str, Any] = {}
    figures.update(_turns(records, failures))
    figures.update(_dead_letters(records, failures))
    figures.update(_queries(records, failures))
    figures["digests_equal"] = not records.digest_differences and records.verify_error is None
    if records.verify_error is not None:
        failures.append(f"the digests could not be verified: {records.verify_error}")
    if records.digest_differences:
        failures.append(f"{len(records.digest_differences)} graph digest(s) differ from the replay: "
                        + "; ".join(records.digest_differences[:3]))
    failures.extend(f"not recovered after {fault}" for fault in records.not_recovered)
    figures["failures"] = failures
    figures["ok"] = not failures
    return figures


def _turns(records: SoakRecords, failures: list[str]) -> dict[str, Any]:
    acked = {(g, t) for g, turns in records.offered.items() for t, status in turns.items() if status == ACKED}
    unacked = {(g, t) for g, turns in records.offered.items() for t, status in turns.items() if status == UNACKED}
    held = {(g, t) for g, counts in records.graphs.items() for t in counts.held}
    lost = sorted(acked - held)
    twice = {g: c.turns - c.passages for g, c in records.graphs.items() if c.turns > c.passages}
    strangers = {g: c.passages - len(c.held) for g, c in records.graphs.items() if c.passages > len(c.held)}
    if lost:
        failures.append(f"{len(lost)} acknowledged turn(s) never applied, e.g. {lost[:3]}")
    if twice:
        failures.append(f"{sum(twice.values())} turn(s) applied twice, in graphs {sorted(twice)[:5]}")
    if strangers:
        failures.append(f"{sum(strangers.values())} passage(s) of turns never offered, in graphs {sorted(strangers)[:5]}")
    return {
        "turns_offered": len(acked) + len(unacked),
        "turns_acknowledged": len(acked),
        "turns_unacknowledged": len(unacked),
        "turns_unacknowledged_applied": len(unacked & held),
        "turns_applied": len(acked & held),
        "turns_lost": len(lost),
        "turns_applied_twice": sum(twice.values()),
        "lost_examples": [list(x) for x in lost[:10]],
    }


def _place(bad: BadRecord) -> tuple[int, int]:
    assert bad.partition is not None and bad.offset is not None, "an unacknowledged bad record has no place"
    return bad.partition, bad.offset


def _dead_letters(records: SoakRecords, failures: list[str]) -> dict[str, Any]:
    found = Counter((p, o) for p, o, _ in records.dead_letters)
    reasons = {(p, o): r for p, o, r in records.dead_letters}
    sent = [b for b in records.bad_sent if b.partition is not None]
    where = {_place(b): b for b in sent}
    missing = [b for b in sent if found[_place(b)] == 0]
    repeated = [b for b in sent if found[_place(b)] > 1]
    right = [b for b in sent if found[_place(b)] and reasons[_place(b)] == b.reason]
    wrong = [(b, reasons[_place(b)]) for b in sent if found[_place(b)] and reasons[_place(b)] != b.reason]
    refused_valid = sorted(k for k in found if k not in where)
    if missing:
        failures.append(f"{len(missing)} bad record(s) not dead-lettered, e.g. {[(b.kind, b.partition, b.offset) for b in missing[:3]]}")
    if repeated:
        failures.append(f"{len(repeated)} bad record(s) dead-lettered more than once, e.g. "
                        f"{[(b.kind, b.partition, b.offset) for b in repeated[:3]]}")
    for bad, reason in wrong[:3]:
        failures.append(f"bad record {bad.kind} at {bad.partition}/{bad.offset} dead-lettered as {reason!r}, not {bad.reason!r}")
    if refused_valid:
        failures.append(f"{len(refused_valid)} record(s) of the turns topic dead-lettered that were not sent as bad, "
                        f"e.g. (partition, offset) {refused_valid[:3]}")
    return {
        "bad_records_sent": len(records.bad_sent),
        "bad_records_acknowledged": len(sent),
        "bad_records_dead_lettered": len(right),
        "bad_records_by_kind": dict(Counter(b.kind for b in sent)),
        "dead_letters_repeated": len(repeated),
        "valid_turns_dead_lettered": len(refused_valid),
    }


def _queries(records: SoakRecords, failures: list[str]) -> dict[str, Any]:
    limit = records.query_timeout_s + QUERY_GRACE_S
    hung = [a for a in records.attempts if a.took_s > limit]
    unclear = [a for a in records.attempts if a.outcome.startswith("error:")]
    if hung:
        failures.append(f"{len(hung)} query attempt(s) ran past their {records.query_timeout_s:g} s timeout "
                        f"(longest {max(a.took_s for a in hung):.1f} s)")
    if unclear:
        failures.append(f"{len(unclear)} query attempt(s) ended without a reply or a timeout: "
                        f"{sorted(Counter(a.outcome for a in unclear).items())[:3]}")
    return {"query_outcomes": dict(Counter(a.outcome for a in records.attempts))}
