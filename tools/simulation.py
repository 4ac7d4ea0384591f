"""`emgas simulate`: graph size under an endless stream whose subjects drift.

A seeded synthetic stream (no extraction: concepts are drawn directly):
every `era_days` the conversation moves to a new subject with its own
vocabulary; each turn mentions `per_turn` concepts of the current subject,
one "weekly" concept is mentioned once a week for ever, and one "once"
concept is mentioned in the first turn only. The stream goes through
`emgas.testing.LocalLog`, so decay ticks, pruning and consolidation happen
exactly as on a worker.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator

from emgas.processors.events import Concept, TurnIngested
from emgas.processors.graph import GraphParams
from emgas.state import keys
from emgas.testing import LocalLog

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
GRAPH = "sim"
WEEKLY = "weekly-anchor"
ONCE = "once-only"


@dataclass(frozen=True)
class Stream:
    days: int = 720
    turns_per_day: int = 8
    era_days: int = 10
    vocabulary: int = 60  # concepts per subject
    per_turn: int = 4
    seed: int = 7


def turns(stream: Stream) -> Iterator[TurnIngested]:
    rng = random.Random(stream.seed)
    n = 0
    for day in range(stream.days):
        subject = day // stream.era_days
        for slot in range(stream.turns_per_day):
            at = START + timedelta(days=day, hours=8 + slot * 14 / stream.turns_per_day)
            ids = [f"s{subject}-w{k}" for k in rng.sample(range(stream.vocabulary), stream.per_turn)]
            if n == 0:
                ids.append(ONCE)
            if slot == 0 and day % 7 == 0:
                ids.append(WEEKLY)
            yield TurnIngested(
                graph_id=GRAPH, turn_id=f"t{n}", speaker="user", text=" ".join(ids), timestamp=at,
                language="en", extractor="simulation",
                concepts=tuple(Concept(id=c, text=c, importance=round(rng.uniform(0.2, 0.8), 3)) for c in ids),
            )
            n += 1


@dataclass(frozen=True)
class Sample:
    day: int
    concepts: int
    edges: int
    passages: int
    topics: int


def simulate(stream: Stream, params: GraphParams, every_days: int = 30) -> tuple[LocalLog, list[Sample]]:
    """Run the stream; the graph's size at the end of every `every_days` days."""
    log = LocalLog(params)
    samples = []
    per_sample = stream.turns_per_day * every_days
    for i, turn in enumerate(turns(stream), start=1):
        log.append(turn)
        if i % per_sample == 0:
            view = log.state.view(GRAPH)
            passages = sum(1 for _ in log.state.repo.store.scan(keys.section(view.ref, b"t")))
            samples.append(Sample(i // stream.turns_per_day, view.concepts, view.edges, passages, len(view.topics)))
    return log, samples


def compare(stream: Stream, params: GraphParams, every_days: int) -> dict:
    """Samples with the given forgetting parameters and with none (no windows)."""
    static = params.model_copy(update={"window_s": 0.0, "consolidate_every_s": 0.0})
    runs = {"forgetting": simulate(stream, params, every_days)[1], "none": simulate(stream, static, every_days)[1]}
    return {
        "stream": asdict(stream),
        "decay": params.decay.model_dump(),
        "samples": {name: [asdict(s) for s in samples] for name, samples in runs.items()},
    }


def format_samples(figures: dict) -> str:
    with_, without = figures["samples"]["forgetting"], figures["samples"]["none"]
    lines = [f"{'day':>5} | {'concepts':>8} {'edges':>7} {'passages':>8} {'topics':>6} | without: {'concepts':>8} {'edges':>7}"]
    for a, b in zip(with_, without):
        lines.append(
            f"{a['day']:>5} | {a['concepts']:>8} {a['edges']:>7} {a['passages']:>8} {a['topics']:>6} |"
            f"          {b['concepts']:>8} {b['edges']:>7}"
        )
    return "\n".join(lines)
