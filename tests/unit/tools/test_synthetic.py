"""The synthetic conversations of `emgas bench`: deterministic and LoCoMo-shaped."""

import statistics
from collections import Counter

import pytest

from emgas.processors.chinese import STOPWORDS
from emgas.processors.extract import ExtractionParams, detect_language, extractor_id, ingest
from emgas.tools.synthetic import CHINESE, ZH_FUNCTION_WORDS, Shape, conversations


def test_the_same_arguments_give_the_same_turns():
    assert conversations(200) == conversations(200)
    assert conversations(200) != conversations(200, Shape(seed=8))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_turns_are_spread_over_graphs_in_sessions_of_minutes_days_apart(language):
    turns = conversations(600, Shape(graphs=3, language=language))
    assert len(turns) == 600 and Counter(t.graph_id for t in turns) == {f"synthetic-{g}": 200 for g in range(3)}
    graph = [t for t in turns if t.graph_id == "synthetic-0"]
    gaps = [(b.timestamp - a.timestamp).total_seconds() for a, b in zip(graph, graph[1:])]
    within = [g for a, b, g in zip(graph, graph[1:], gaps) if a.session_id == b.session_id]
    between = [g for a, b, g in zip(graph, graph[1:], gaps) if a.session_id != b.session_id]
    assert all(60 <= g <= 6 * 60 for g in within)
    assert between and all(g >= 18 * 3600 for g in between)
    sessions = Counter(t.session_id for t in graph)
    assert all(15 <= n <= 30 for n in list(sessions.values())[:-1])  # the last one may be cut short
    assert len({t.turn_id for t in graph}) == len(graph)


def test_extraction_finds_about_ten_concepts_per_turn():
    params = ExtractionParams()
    turns = conversations(300)
    counts = [len(ingest(t, params, extractor_id(params)).concepts) for t in turns]
    assert 8 <= statistics.mean(counts) <= 12
    assert all(15 <= len(t.text.split()) <= 30 for t in turns)


def test_chinese_conversations_have_the_same_shape_in_chinese_words():
    params = ExtractionParams()
    turns = conversations(300, CHINESE)
    assert turns == conversations(300, CHINESE)
    assert all(detect_language(t.text, params) == "zh" and " " not in t.text for t in turns)
    # about as many concepts a turn as MemDaily's (13.6)
    counts = [len(ingest(t, params, extractor_id(params)).concepts) for t in turns]
    assert 12 <= statistics.mean(counts) <= 16


def test_chinese_function_words_are_stopwords_of_the_chinese_extraction():
    assert set(ZH_FUNCTION_WORDS) <= STOPWORDS
