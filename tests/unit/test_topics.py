"""Consolidation into topic nodes: deterministic, and it finds a planted cluster."""

import random

from processors.events import Consolidate
from processors.graph import GraphParams
from processors.topics import TopicParams, propagate_labels, topics_of
from state.driver import LocalLog
from tests.factories import ingested

FRAMEWORKS = ["angular", "react", "svelte", "vue"]


def planted_counts(seed: int = 3):
    """Turns mixing 2–3 front-end frameworks with noise words from a large vocabulary."""
    rng = random.Random(seed)
    turns = []
    for i in range(300):
        words = set(rng.sample(FRAMEWORKS, rng.choice([2, 3]))) if i % 3 == 0 else set()
        words |= {f"noise{rng.randrange(400)}" for _ in range(3)}
        turns.append(sorted(words))
    counts, pairs = {}, {}
    for words in turns:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        for i, a in enumerate(words):
            for b in words[i + 1:]:
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
    return turns, counts, pairs


def test_a_planted_cluster_becomes_one_topic():
    turns, counts, pairs = planted_counts()
    topics = topics_of(pairs, counts, {w: w.title() for w in counts}, len(turns), TopicParams())
    assert [t.members for t in topics] == [tuple(FRAMEWORKS)]
    assert topics[0].id.startswith("topic:") and topics[0].id.removeprefix("topic:") in FRAMEWORKS
    assert len(topics[0].label.split(" · ")) == 3


def test_same_counts_same_topics_whatever_the_input_order():
    turns, counts, pairs = planted_counts()
    texts = {w: w for w in counts}
    shuffled = dict(sorted(pairs.items(), key=lambda kv: random.Random(1).random()))
    assert topics_of(pairs, counts, texts, len(turns), TopicParams()) == topics_of(
        shuffled, dict(reversed(counts.items())), texts, len(turns), TopicParams()
    )


def test_label_propagation_splits_two_cliques_joined_by_one_weak_edge():
    clique = lambda names: {(a, b): 1.0 for i, a in enumerate(names) for b in names[i + 1:]}
    edges = {**clique(["a", "b", "c", "d"]), **clique(["w", "x", "y", "z"]), ("d", "w"): 0.1}
    labels = propagate_labels(edges, max_rounds=20)
    assert len({labels[n] for n in "abcd"}) == 1 and len({labels[n] for n in "wxyz"}) == 1
    assert labels["a"] != labels["w"]


def test_consolidation_is_a_daily_event_and_its_topics_are_stored():
    turns, _, _ = planted_counts()
    log = LocalLog(GraphParams(window_s=0))
    for i, words in enumerate(turns):
        log.append(ingested("g", f"t{i}", {w: 0.5 for w in words}, minute=i * 10))
    consolidations = [e for e in log.log if isinstance(e, Consolidate)]
    assert len(consolidations) == 2  # 300 turns, 10 minutes apart: two day boundaries crossed
    assert [t.members for t in log.state.view("g").topics] == [tuple(FRAMEWORKS)]
    assert [t.members for t in log.state.repo.topics(log.state.view("g").ref)] == [tuple(FRAMEWORKS)]
