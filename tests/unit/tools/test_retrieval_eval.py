"""The evaluation's metrics and the baseline retrievers, on hand-made fixtures."""

import math

import numpy as np
import pytest

from emgas.processors.extract import ExtractionParams, ingest
from emgas.tools.lexical import BM25
from emgas.tools.walks import maibot_activation, personalised_pagerank
from emgas.tools.evaluation import score, summarise
from tests.support.factories import T0


@pytest.mark.parametrize(
    ("ranked", "evidence", "r5", "r10", "mrr"),
    [
        (["a", "b", "c"], {"a"}, 1.0, 1.0, 1.0),
        (["x", "y", "a"], {"a", "b"}, 0.5, 0.5, 1 / 3),
        ([f"t{i}" for i in range(10)], {"t7", "t9", "zz"}, 0.0, 2 / 3, 1 / 8),
        (["x"], {"a"}, 0.0, 0.0, 0.0),
    ],
)
def test_recall_and_mrr(ranked, evidence, r5, r10, mrr):
    got = score(ranked, frozenset(evidence))
    assert got == pytest.approx({"recall@5": r5, "recall@10": r10, "mrr": mrr})


def test_summary_is_per_category_and_overall():
    rows = [(1, {"recall@5": 1.0, "recall@10": 1.0, "mrr": 1.0}), (4, {"recall@5": 0.0, "recall@10": 0.5, "mrr": 0.25})]
    summary = summarise(rows)
    assert summary["all"] == {"recall@5": 0.5, "recall@10": 0.75, "mrr": 0.625, "n": 2}
    assert summary["1 multi-hop"]["n"] == 1 and summary["4 single-hop"]["recall@10"] == 0.5


def test_bm25_by_hand():
    index = BM25([("d1", "kafka kafka broker"), ("d2", "broker")], k1=1.5, b=0.75)
    avgdl = 2.0  # terms: [kafka, kafka, broker] and [broker]
    idf_kafka = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    expected = idf_kafka * 2 * 2.5 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / avgdl))
    assert index.scores("Kafka?") == pytest.approx({"d1": expected})
    assert set(index.scores("brokers")) == {"d1", "d2"}  # lemmas: brokers -> broker


def test_personalised_pagerank_keeps_mass_near_the_seed():
    # a path 0 - 1 - 2 - 3, both directions, equal weights
    src = np.array([0, 1, 1, 2, 2, 3])
    dst = np.array([1, 0, 2, 1, 3, 2])
    rank = personalised_pagerank(4, src, dst, np.ones(6), [0], damping=0.5)
    assert rank.sum() == pytest.approx(1.0)
    assert rank[0] > rank[1] > rank[2] > rank[3] > 0


def test_maibot_activation_by_hand():
    # strength = pair count: 0–1 strength 2, 1–2 strength 4, 0–3 strength 1
    neighbours = [{1: 2, 3: 1}, {0: 2, 2: 4}, {1: 4}, {0: 1}]
    got = maibot_activation(neighbours, [0], max_depth=3)
    # 0 → 1: 1 − 1/2 = 0.5; 1 → 2: 0.5 − 1/4 = 0.25; 0 → 3: 1 − 1 = 0 (not reached)
    assert got == {0: 1.0, 1: 0.5, 2: 0.25}
    assert maibot_activation(neighbours, [0, 2])[1] == pytest.approx(0.5 + 0.75)


def test_the_speaker_name_can_become_a_concept():
    from emgas.processors.events import Turn

    turn = Turn(graph_id="g", turn_id="t", speaker="Caroline", text="I went to a support group yesterday.", timestamp=T0)
    with_speaker = {c.id for c in ingest(turn, ExtractionParams(), "x").concepts}
    without = {c.id for c in ingest(turn, ExtractionParams(include_speaker=False), "x").concepts}
    assert "caroline" in with_speaker and "caroline" not in without


def test_without_the_dense_extra_the_dense_retrievers_are_skipped_or_refused(monkeypatch):
    from emgas.streams.errors import ConfigError
    from emgas.tools import dense, evaluation

    monkeypatch.setattr(dense, "available", lambda: False)
    names, skipped = evaluation._runnable(())
    assert "dense" not in names and "emgas+dense" not in names and "emgas" in names
    assert set(skipped) == {"dense", "emgas+dense"} and "emgas[dense]" in skipped["dense"]
    with pytest.raises(ConfigError, match="emgas\\[dense\\]"):
        evaluation._runnable(("emgas", "dense"))
    monkeypatch.setattr(dense, "available", lambda: True)
    assert evaluation._runnable(("dense",)) == (["dense"], {})


def test_a_missing_model_package_is_named_in_the_error(monkeypatch):
    from emgas.service import encoder as dense

    monkeypatch.setattr(dense, "MODEL_PACKAGE", "no_such_package_here")
    assert not dense.available()
    with pytest.raises(dense.DenseUnavailable, match="no_such_package_here"):
        dense.Encoder()
