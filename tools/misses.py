"""Why emgas misses evidence (`emgas eval locomo --misses OUT`).

For every answerable question whose evidence is not all in emgas's top 10,
each missing evidence turn gets its rank in emgas's full ranking (None when
nothing scored it) and one reason, the first that applies:

- `no_seed`: the question found no concept of the graph at all;
- `no_shared_concept`: the turn mentions none of the question's seeds;
- `hubs_only`: the seeds it mentions are all hubs (concepts in at least
  `HUB_SHARE` of the graph's turns: speaker names, "today");
- `outranked`: it mentions a specific seed, yet other turns rank above it.

and three facts that say which remedy could reach it: `near_hit` (a turn of
the top 10 sits within `NEAR` places of it in the same session: session or
context spreading could reach it), `shares_with_top` (it shares a rare
concept, one in at most N^(1 − SPECIFIC) of the N turns, with the top 10
passages: a second hop from them could reach it),
and the question's `sessions` (how many sessions its evidence spans).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from emgas.processors.events import ActivationQuery, QueryParams
from emgas.service.retrieval import answer
from emgas.tools.evaluation import CATEGORIES, DEPTH, Question, build, load

if TYPE_CHECKING:
    from emgas.state.projector import PartitionState
    from emgas.state.view import GraphView
    from emgas.streams.settings import Settings

HUB_SHARE = 0.05  # a concept in ≥ 5 % of a graph's turns is a hub
NEAR = 3  # session places within which a top-10 turn counts as near
FULL_DEPTH = 1000  # how deep the ranking is read for the ranks of missed turns
SPECIFIC = 0.6  # specificity log(N/c)/log(N) of a rare concept (c ≤ N^0.4: 13 of 600 turns)
REASONS = ("no_seed", "no_shared_concept", "hubs_only", "outranked")


@dataclass(frozen=True)
class MissedTurn:
    turn_id: str
    rank: int | None  # 1-based, in emgas's ranking; None: never scored
    reason: str
    shared_seeds: tuple[str, ...]
    near_hit: bool
    shares_with_top: bool


@dataclass(frozen=True)
class Miss:
    conversation_id: str
    category: str
    question: str
    seeds: tuple[str, ...]
    hubs: tuple[str, ...]  # the seeds that are hubs
    sessions: int  # sessions the evidence spans
    found: tuple[str, ...]  # evidence turns in the top 10
    missed: tuple[MissedTurn, ...]


def analyse(directory: Path, settings: "Settings", only: Sequence[str] = ()) -> list[Miss]:
    """The misses of emgas at 10 over the questions of `directory`."""
    turns, questions = load(directory, only)
    misses: list[Miss] = []
    for conversation, conversation_turns in turns.items():
        log = build(conversation_turns, settings.graph, settings.extraction)
        known = {t.turn_id for t in conversation_turns}
        for q in (q for q in questions if q.conversation_id == conversation):
            miss = _question(log.state, q, q.evidence & known, settings)
            if miss is not None:
                misses.append(miss)
    return misses


def _question(state: "PartitionState", q: Question, evidence: frozenset[str], settings: "Settings") -> Miss | None:
    view = state.view(q.conversation_id)
    assert view is not None
    query = ActivationQuery(
        request_id="misses", graph_id=q.conversation_id, text=q.text, reinforce=False,
        params=QueryParams(top_passages=FULL_DEPTH),
    )
    reply = answer(state, query, settings.activation, settings.extraction, lambda: 0.0)
    ranking = [p.turn_id for p in reply.passages]
    top = ranking[:DEPTH]
    if not evidence or evidence <= set(top):
        return None
    seeds = reply.seeds
    hubs = _hubs(view, seeds)
    passages = state.repo.passages(view.ref, sorted(evidence | set(top)))
    specificity = view.specificity()
    top_concepts = {c for t in top for c in passages[t].concept_ids
                    if c in view.index and specificity[view.index[c]] >= SPECIFIC}
    rank_of = {t: i + 1 for i, t in enumerate(ranking)}
    missed = tuple(
        _missed_turn(view, t, passages[t].concept_ids, seeds, hubs, top, top_concepts, rank_of.get(t))
        for t in sorted(evidence - set(top))
    )
    return Miss(
        conversation_id=q.conversation_id, category=CATEGORIES[q.category], question=q.text,
        seeds=tuple(seeds), hubs=tuple(sorted(hubs)),
        sessions=len({view.place_of[t][0] for t in evidence}),
        found=tuple(sorted(evidence & set(top))), missed=missed,
    )


def _hubs(view: "GraphView", seeds: Sequence[str]) -> set[str]:
    counts = view.counts
    return {s for s in seeds if counts[view.index[s]] >= HUB_SHARE * view.turns}


def _missed_turn(
    view: "GraphView", turn_id: str, concepts: Sequence[str], seeds: Sequence[str], hubs: set[str],
    top: list[str], top_concepts: set[str], rank: int | None,
) -> MissedTurn:
    shared = tuple(s for s in seeds if s in concepts)
    if not seeds:
        reason = "no_seed"
    elif not shared:
        reason = "no_shared_concept"
    elif set(shared) <= hubs:
        reason = "hubs_only"
    else:
        reason = "outranked"
    near = {other for other, _ in view.context(turn_id, NEAR)}
    return MissedTurn(
        turn_id=turn_id, rank=rank, reason=reason, shared_seeds=shared,
        near_hit=bool(near & set(top)), shares_with_top=bool(set(concepts) & top_concepts),
    )


def summarise(misses: list[Miss]) -> dict[str, dict[str, float]]:
    """Per category: missed turns by reason, and the shares of them near a hit,
    sharing a concept with the top 10, ranked within 50, and in questions
    whose evidence spans several sessions."""
    table: dict[str, Counter] = defaultdict(Counter)
    for miss in misses:
        for category in (miss.category, "all"):
            row = table[category]
            row["questions"] += 1
            for turn in miss.missed:
                row["turns"] += 1
                row[turn.reason] += 1
                row["near_hit"] += turn.near_hit
                row["shares_with_top"] += turn.shares_with_top
                row["ranked_within_50"] += turn.rank is not None and turn.rank <= 50
                row["multi_session"] += miss.sessions > 1
    return {category: dict(row) for category, row in sorted(table.items())}


COLUMNS = ("questions", "turns", *REASONS, "near_hit", "shares_with_top", "ranked_within_50", "multi_session")


def format_summary(summary: dict[str, dict[str, float]]) -> str:
    header = f"{'category':<15}" + "".join(f"{c:>18}" for c in COLUMNS)
    lines = [header]
    for category, row in summary.items():
        lines.append(f"{category:<15}" + "".join(f"{row.get(c, 0):>18}" for c in COLUMNS))
    return "\n".join(lines)


def run_misses(directory: Path, settings: "Settings", out: Path, only: Sequence[str] = ()) -> str:
    """Write every miss to `out` (JSON) and return the summary table."""
    misses = analyse(directory, settings, only)
    summary = summarise(misses)
    out.write_text(json.dumps({"summary": summary, "misses": [asdict(m) for m in misses]}, indent=1))
    return format_summary(summary)
