"""Concept extraction: lemmatisation, n-gram dedup, Chinese, determinism."""

import pytest
from hypothesis import example, given, settings, strategies as st

from emgas.processors.extract import ExtractionParams, detect_language, extract, normalise, query_seeds

P = ExtractionParams()
YAKE = ExtractionParams(method="yake")


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [("Consumers", "consumer"), ("running", "run"), ("ran", "run"), ("Postgres Databases", "postgres database"),
     ("Joanna's", "joanna"), ("Melanie’s kids", "melanie kid"), ("dog's", "dog")],
)
def test_normalise_lemmatises_to_one_node(phrase, expected):
    assert normalise(phrase, "en") == expected


def test_overlapping_ngrams_collapse_to_minimal_cover():
    text = "I've been debugging our Kafka consumer lag all morning; the Kafka consumer lag is bad."
    ids = [c.id for c in extract(text, YAKE)]
    assert "kafka" in ids and "lag" in ids
    assert "kafka consumer lag" not in ids
    # no kept concept contains another as a run of words
    assert not [(a, b) for a in ids for b in ids if a != b and f" {b} " in f" {a} "]


@pytest.mark.parametrize("params", [P, YAKE])
def test_importance_in_unit_interval_and_ordered(params):
    concepts = extract("Melanie painted a sunrise over the lake in Sweden last summer.", params)
    assert concepts, "expected concepts"
    assert all(0 < c.importance <= 1 for c in concepts)
    assert [c.importance for c in concepts] == sorted((c.importance for c in concepts), reverse=True)


def test_content_words_are_lemmas_with_names_first():
    concepts = extract("Yesterday Melanie painted two sunrises. Sweden was cold; the lakes were frozen.", P)
    assert [c.id for c in concepts] == ["melanie", "yesterday", "paint", "sunrise", "sweden", "cold", "lake", "freeze"]
    by_id = {c.id: c for c in concepts}
    assert by_id["melanie"].importance == 0.8 and by_id["sweden"].importance == 0.5  # sentence-initial
    assert by_id["sunrise"].text == "sunrises"


def test_extraction_is_deterministic():
    text = "Caroline went to the LGBTQ support group and felt accepted by everyone there."
    assert extract(text, P) == extract(text, P)


@pytest.mark.parametrize(
    ("text", "lang"), [("Hello there, friend", "en"), ("我最近在学习用Kafka做流处理", "zh"), ("123 !!", "en")]
)
def test_detect_language(text, lang):
    assert detect_language(text, P) == lang


def test_chinese_goes_through_jieba():
    ids = [c.id for c in extract("我妹妹英格丽德在卑尔根研究鳕鱼，她说海洋研究所的工作很有意思。", P)]
    assert "卑尔根" in ids and "鳕鱼" in ids


def test_query_seeds_include_words_of_phrases():
    seeds = query_seeds("Why does the Kafka consumer lag spike?", P)
    assert "kafka" in seeds and "lag" in seeds


def test_max_concepts_is_respected():
    text = " ".join(f"Topic{i} alpha{i} beta{i} gamma{i}." for i in range(40))
    assert len(extract(text, ExtractionParams(max_concepts=5))) <= 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Maria went to Wales", {"maria", "wales"}), ("We watched Mars rise", {"mars"}), ("Dogs ran", {"dog", "run"})],
)
def test_names_keep_their_form_and_words_their_lemma(text, expected):
    assert expected <= {c.id for c in extract(text, P)}


def test_a_name_typed_in_lower_case_still_seeds_the_name():
    assert "maria" in query_seeds("when did maria go to the beach?", P)


@pytest.mark.parametrize("language", ["en", "de", "zh", "xx"])
def test_the_stopwords_are_yakes_own_read_without_importing_it(language):
    import yake

    from emgas.processors.extract import stopword_set

    assert stopword_set(language) == yake.KeywordExtractor(lan=language).stopword_set
    assert "the" in stopword_set("en")


def _cover_by_every_pair(candidates):
    """`_minimal_cover` as first written: every id compared with every other."""
    from emgas.processors.extract import _contains

    best = {}
    for c in candidates:
        if c.id not in best or c.importance > best[c.id].importance:
            best[c.id] = c
    importance = {cid: c.importance for cid, c in best.items()}
    kept = []
    for cid in best:
        parts = [other for other in best if other != cid and _contains(cid, other)]
        for part in parts:
            importance[part] = max(importance[part], importance[cid])
        if not parts:
            kept.append(cid)
    return sorted((best[c]._replace(importance=importance[c]) for c in kept), key=lambda c: (-c.importance, c.id))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["kafka", "lag", "consumer", "日志", "a"]), min_size=1, max_size=3),
                          st.floats(0.01, 1.0)), max_size=12))
def test_the_minimal_cover_compares_only_phrases_with_shorter_ids_and_gives_what_every_pair_did(raw):
    from emgas.processors.extract import Candidate, _minimal_cover

    candidates = [Candidate(" ".join(words), " ".join(words), w) for words, w in raw]
    assert _minimal_cover(candidates) == _cover_by_every_pair(candidates)


def _chinese_by_candidates(text, most):
    """The Chinese concepts as first written: a `Candidate` per term, then `_minimal_cover`."""
    from emgas.processors import chinese
    from emgas.processors.extract import Candidate, _minimal_cover

    weights = chinese.weights(text)
    if not weights:
        return []
    top = max(weights.values())
    candidates = []
    for term, weight in weights.items():
        cid = term if not term.isascii() else normalise(term, "zh")
        if cid and not cid.isdigit():
            candidates.append(Candidate(cid, term, min(1.0, max(1e-6, weight / top))))
    return [tuple(c) for c in _minimal_cover(candidates)[:most]]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["咖啡", "猫", "我", "的", "喜欢", "运动鞋", "茉莉花", "Kafka", "cats", "cat", "running", "run", "OPPO",
                                 "Reno7", "new york", "12", " ", "，", "。", "好的", "的了"]), max_size=14),
       st.integers(1, 12))
@example(["猫", " ", "cats", " ", "cat", "咖啡"], 5)  # two terms, one id, the same weight: the first stays
def test_chinese_concepts_are_the_minimal_cover_of_a_candidate_per_term(parts, most):
    from emgas.processors.extract import _chinese_chosen

    text = "".join(parts)
    assert _chinese_chosen(text, most) == _chinese_by_candidates(text, most)
