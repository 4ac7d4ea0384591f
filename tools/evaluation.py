"""Retrieval quality on LoCoMo-shaped data, in-process (`emgas eval locomo`).

Each conversation becomes one graph, built through the same extraction and
fold as a worker (and, when the graph parameters have windows, the same
decay ticks and consolidations, through `emgas.testing.LocalLog`). Every
question is asked as an activation query that does not reinforce, and the
passages returned are scored against the evidence turn ids: recall@5,
recall@10 and MRR, per category and overall, and recall@10 per
conversation (the spread: a gain that comes from one conversation shows).
Adversarial questions (category 5, whose right answer is "not mentioned")
are left out. With `paper_style` the figures are computed as the LoCoMo
paper's Table 3 does: all five categories, and a question without evidence
(none given, or none that matches a turn) scores 1.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from emgas.processors.activation import ActivationParams
from emgas.processors.events import Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.processors.graph import GraphParams
from emgas.testing import LocalLog
from emgas.tools.baselines import DENSE, NAMES, retrievers
from emgas.streams.errors import ConfigError, InputFileError

if TYPE_CHECKING:
    from emgas.streams.settings import Settings

CATEGORIES = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}
ALL_CATEGORIES = {**CATEGORIES, 5: "5 adversarial"}  # paper style
DEPTH = 10


@dataclass(frozen=True)
class Question:
    conversation_id: str
    category: int
    text: str
    evidence: frozenset[str]


def _aware(raw: str) -> datetime:
    t = datetime.fromisoformat(raw)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def load(
    directory: Path, only: Sequence[str] = (), paper_style: bool = False
) -> tuple[dict[str, list[Turn]], list[Question]]:
    """Turns by conversation (in file order) and the answerable questions
    (of the conversations in `only`, when given); with `paper_style`, every
    question, adversarial and evidence-less ones included."""
    if not (directory / "turns.jsonl").exists() or not (directory / "qa.jsonl").exists():
        raise InputFileError(f"{directory} needs turns.jsonl and qa.jsonl")
    turns: dict[str, list[Turn]] = defaultdict(list)
    for line in (directory / "turns.jsonl").read_text().splitlines():
        row = json.loads(line)
        session = row.get("session")
        turns[row["conversation_id"]].append(Turn(
            graph_id=row["conversation_id"], turn_id=row["turn_id"], speaker=row["speaker"],
            text=row["text"], timestamp=_aware(row["timestamp"]),
            session_id=None if session is None else str(session),
        ))
    questions = []
    for line in (directory / "qa.jsonl").read_text().splitlines():
        row = json.loads(line)
        answerable = row["category"] in CATEGORIES and bool(row["evidence"])
        if answerable or (paper_style and row["category"] in ALL_CATEGORIES):
            questions.append(Question(row["conversation_id"], row["category"], row["question"], frozenset(row["evidence"])))
    if only:
        turns = {c: t for c, t in turns.items() if c in only}
        questions = [q for q in questions if q.conversation_id in only]
    return dict(turns), questions


def build(turns: Iterable[Turn], graph: GraphParams, extraction: ExtractionParams) -> LocalLog:
    log = LocalLog(graph)
    extractor = extractor_id(extraction)
    for turn in turns:
        log.append(ingest(turn, extraction, extractor))
    return log


def score(ranked: list[str], evidence: frozenset[str]) -> dict[str, float]:
    """recall@k = |evidence ∩ top k| / |evidence|; MRR = 1 / rank of the first evidence turn."""
    first = next((i + 1 for i, t in enumerate(ranked) if t in evidence), None)
    return {
        "recall@5": len(evidence.intersection(ranked[:5])) / len(evidence),
        "recall@10": len(evidence.intersection(ranked[:10])) / len(evidence),
        "mrr": 1.0 / first if first else 0.0,
    }


PERFECT = {"recall@5": 1.0, "recall@10": 1.0, "mrr": 1.0}  # a question without evidence, paper style


def summarise(scored: list[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for category, s in scored:
        groups["all"].append(s)
        groups[ALL_CATEGORIES[category]].append(s)
    return {
        name: {**{k: sum(s[k] for s in rows) / len(rows) for k in rows[0]}, "n": len(rows)}
        for name, rows in sorted(groups.items())
    }


def evaluate(
    directory: Path,
    graph: GraphParams,
    activation: ActivationParams,
    extraction: ExtractionParams,
    names: Sequence[str] = tuple(n for n in NAMES if n not in DENSE),
    progress: Callable[[int], None] = lambda n: None,
    only: Sequence[str] = (),
    paper_style: bool = False,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, float]], dict[str, int]]:
    """Metrics per retriever and category, recall@10 per retriever and
    conversation, and the graphs' final sizes."""
    turns, questions = load(directory, only, paper_style)
    scored: dict[str, list[tuple[int, dict[str, float]]]] = {name: [] for name in names}
    by_conversation: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in names}
    sizes: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)  # answering, per retriever
    for conversation, conversation_turns in turns.items():
        log = build(conversation_turns, graph, extraction)
        _add_sizes(sizes, log, conversation, conversation_turns)
        ranked_by = retrievers(log.state, conversation, activation, extraction, DEPTH)
        known = {t.turn_id for t in conversation_turns}
        for q in (q for q in questions if q.conversation_id == conversation):
            evidence = q.evidence & known  # evidence ids that match no turn are ignored
            if not evidence and not paper_style:
                continue
            for name in names:
                started = time.perf_counter()
                ranked = ranked_by[name](q.text)
                seconds[name] += time.perf_counter() - started
                s = score(ranked, evidence) if evidence else PERFECT
                scored[name].append((q.category, s))
                by_conversation[name][conversation].append(s["recall@10"])
        progress(len(conversation_turns))
    spread = {
        name: {c: sum(values) / len(values) for c, values in sorted(rows.items())}
        for name, rows in by_conversation.items()
    }
    metrics = {name: summarise(rows) for name, rows in scored.items()}
    for name, rows in scored.items():
        if rows:
            metrics[name]["all"]["ms_per_question"] = round(seconds[name] * 1000 / len(rows), 2)
    return metrics, spread, dict(sizes)


def _add_sizes(sizes: dict[str, int], log: LocalLog, conversation: str, turns: list[Turn]) -> None:
    view = log.state.view(conversation)
    sizes["concepts"] += view.concepts
    sizes["edges"] += view.edges
    sizes["topics"] += len(view.topics)
    sizes["topic_members"] += sum(len(t.members) for t in view.topics)
    sizes["events"] += len(log.log)
    sizes["pruned_passages"] += len(turns) - len(view.place_of)


def run_eval(
    directory: Path, settings: "Settings", names: Sequence[str] = (), only: Sequence[str] = (),
    paper_style: bool = False,
) -> dict:
    """The figures `emgas eval locomo` prints and writes, with a progress bar.

    `names` empty: every retriever, the dense ones only when their extra is
    installed (`skipped` says so); a dense one asked for by name without
    the extra is an error."""
    from tqdm import tqdm

    turns, _ = load(directory, only)
    if not turns:
        raise InputFileError(f"no conversation {', '.join(only)} in {directory}")
    names, skipped = _runnable(names)
    started = time.perf_counter()
    with tqdm(total=sum(len(t) for t in turns.values()), unit="turn", desc="eval") as bar:
        metrics, spread, sizes = evaluate(
            directory, settings.graph, settings.activation, settings.extraction, names, bar.update, only,
            paper_style,
        )
    return {
        "style": "paper" if paper_style else "answerable",
        "retrievers": metrics,
        "conversations": {name: {"recall@10": rows, **_spread(rows)} for name, rows in spread.items()},
        "skipped": skipped,
        "seconds": round(time.perf_counter() - started, 1),
        "graphs": sizes,
        "parameters": {"graph": settings.graph.model_dump(mode="json"), "activation": settings.activation.model_dump(mode="json")},
    }


def _runnable(names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    from emgas.tools import dense

    if dense.available() and (refused := dense.refusal()) is None:
        return list(names or NAMES), {}
    why = "needs the extra emgas[dense]: pip install -e '.[dense]' in a clone of emgas"
    if dense.available():
        why = f"the encoder's files are not the pinned ones: {refused}"
    if asked := [n for n in names if n in DENSE]:
        raise ConfigError(f"retriever {', '.join(asked)} {why}")
    return [n for n in (names or NAMES) if n not in DENSE], {n: why for n in DENSE}


def _spread(per_conversation: dict[str, float]) -> dict[str, float]:
    """min, max and population standard deviation of per-conversation recall@10."""
    values = list(per_conversation.values())
    if not values:
        return {}
    return {"min": min(values), "max": max(values), "stdev": statistics.pstdev(values)}


def format_table(figures: dict) -> str:
    lines = [f"{'retriever':<12} {'category':<15} {'n':>5} {'R@5':>7} {'R@10':>7} {'MRR':>7} {'ms/q':>7}"]
    for name, metrics in figures["retrievers"].items():
        for category, m in metrics.items():
            cost = f" {m['ms_per_question']:>7.2f}" if "ms_per_question" in m else ""
            lines.append(f"{name:<12} {category:<15} {m['n']:>5} {m['recall@5']:>7.3f} {m['recall@10']:>7.3f} {m['mrr']:>7.3f}{cost}")
    lines.append("recall@10 per conversation (min / max / stdev):")
    for name, c in figures["conversations"].items():
        if c["recall@10"]:
            each = " ".join(f"{conv} {r:.3f}" for conv, r in c["recall@10"].items())
            lines.append(f"  {name:<12} {c['min']:.3f} / {c['max']:.3f} / {c['stdev']:.3f}   {each}")
    for name, why in figures["skipped"].items():
        lines.append(f"{name}: skipped, {why}")
    sizes = figures["graphs"]
    lines.append(f"graphs: {sizes['concepts']} concepts, {sizes['edges']} edges, {sizes['topics']} topics "
                 f"({sizes['topic_members']} members), {sizes['events']} events, {sizes['pruned_passages']} passages pruned")
    return "\n".join(lines)
