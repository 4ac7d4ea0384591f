"""Retrieval in the words people use: Chinese terms, questions asked together,
query words the graph lacks expanded through a lexicon, and replies that say
why they are empty."""

import functools
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emgas.processors import chinese
from emgas.processors.activation import ActivationParams, fuse_questions, spread, spread_groups
from emgas.processors.codec import decode_reply, encode
from emgas.processors.events import ActivationQuery, Turn
from emgas.processors.expansion import (
    EXPANSION_MASS, MAX_PER_WORD, SIMILAR_MASS, expansion_seeds, related_concepts, similar_seeds,
)
from emgas.processors.extract import ExtractionParams, extract, extractor_id, ingest, query_parts, query_seeds
from emgas.processors.graph import GraphParams
from emgas.service.retrieval import answer, find_seeds
from emgas.service.semantic import VectorCache
from emgas.service.wordnet import WordNet
from emgas.testing import LocalLog
from emgas.tools.lexical import terms
from tests.support.wordnet import WORDNET_DIR, needs_wordnet

P = ExtractionParams()
T0 = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)


@functools.cache
def wordnet() -> WordNet:
    return WordNet.load(WORDNET_DIR)


# Chinese terms

@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        ("我同事身高164厘米", {"同事", "身高", "厘米"}, {"我", "164"}),
        ("金融科技精英论坛的地点是北京。", {"金融", "科技", "论坛", "地点", "北京", "融科"}, {"的", "是", "。"}),
        ("我同事有多高来着？另外，时间是什么？", {"同事", "多高"}, {"来着", "另外", "什么"}),
        ("我的手机是OPPOReno7", {"手机", "opporeno7"}, {"我的"}),
    ],
)
def test_chinese_terms_are_words_and_bigrams_without_function_words(text, present, absent):
    found = set(chinese.terms(text))
    assert present <= found and not absent & found, found


def test_chinese_concepts_keep_the_fact_a_question_asks_for():
    ids = {c.id for c in extract("我同事身高164厘米", P)}
    assert {"同事", "身高"} <= ids  # the old keyword filter kept only 同事
    assert "同事" in query_seeds("我同事有多高来着？", P)


def test_a_long_chinese_turn_keeps_its_words_before_bigrams_that_are_no_word():
    # 25+ terms, 20 kept: the fragments (豆把, 了一, 的运) weigh a quarter of an
    # occurrence, the bigram words (运动) half, so 运动鞋 and 好笑 stay.
    text = "memory: 土豆把Mila新买的运动鞋咬坏了一只，Mila又气又好笑，晚上还趴在门口不肯进屋。"
    weights = chinese.weights(text)
    assert len(weights) > P.max_concepts
    assert weights["豆把"] < weights["运动"] / 2
    ids = {c.id for c in extract(text, P)}
    assert {"运动鞋", "好笑", "土豆", "门口"} <= ids
    assert "豆把" not in ids


@pytest.mark.parametrize(
    ("text", "tokens", "expected"),
    [
        ("我妹妹住在成都", "words", ["妹妹", "成都"]),
        ("住在成都", "chars", ["住", "在", "成", "都", "住在", "在成", "成都"]),
        ("Pretzel loves the beach", "words", ["pretzel", "love", "beach"]),
        ("Pretzel loves the beach", "chars", ["pretzel", "love", "beach"]),
    ],
)
def test_bm25_terms_tokenise_chinese(text, tokens, expected):
    assert sorted(terms(text, tokens)) == sorted(expected)


# Several questions in one query

@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("我上司叫什么？另外，论坛的地点是什么？", ["我上司叫什么", "另外，论坛的地点是什么"]),
        ("Where does Nora run? And when did she start?", ["Where does Nora run", "And when did she start"]),
        ("What pets do I have", ["What pets do I have"]),
        ("?!", ["?!"]),
        ("version 2.5 of Kafka", ["version 2.5 of Kafka"]),
    ],
)
def test_query_parts_split_where_a_sentence_ends(text, parts):
    assert query_parts(text) == parts


def _chain(n: int):
    """Neighbours of a path graph 0 - 1 - ... - n-1, unit weights."""
    def neighbours(i: int):
        idx = np.array([j for j in (i - 1, i + 1) if 0 <= j < n], dtype=np.int64)
        return idx, np.ones(idx.size)
    return neighbours


def test_one_group_spreads_as_before_bit_for_bit():
    params = ActivationParams()
    plain, _ = spread(6, [0, 3], _chain(6), params)
    grouped, _, _ = spread_groups(6, [{0: 1.0, 3: 1.0}], _chain(6), params)
    assert plain.tobytes() == grouped.tobytes()


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5))
def test_each_question_weighs_the_same_whatever_its_number_of_seeds(small, large):
    """Two questions on disjoint parts of a graph: their seeds end with equal total activation."""
    n = 40
    first = {i: 1.0 for i in range(small)}
    second = {20 + i: 1.0 for i in range(large)}
    params = ActivationParams(propagation_decay=0.0)  # nothing moves: the seeds keep their start
    activation, _, _ = spread_groups(n, [first, second], _chain(n), params)
    assert activation[:20].sum() == pytest.approx(activation[20:].sum())
    assert activation.sum() == pytest.approx(small + large)


# Expansion through a lexicon (a fake one: the rule, not WordNet)

class TinyLexicon:
    """pet (a role: nothing below) is an animal; animal > dog > greyhound; tourney = tournament."""
    words = {0: ("pet",), 1: ("animal", "beast"), 2: ("dog",), 3: ("greyhound",), 4: ("cat",), 5: ("racer",)}
    hyper = {0: [1], 2: [1], 3: [2], 4: [1], 5: [1]}
    hypo = {1: [2, 4, 5], 2: [3]}

    def synonyms(self, word, n):
        return ["tournament"] if word == "tourney" else []

    def derivations(self, word, n):
        return ["mentorship"] if word == "mentor" else []

    def noun_senses(self, word, n):
        return [s for s, ws in self.words.items() if word in ws][:n]

    def hypernyms(self, synset):
        return self.hyper.get(synset, [])

    def hyponym_count(self, synset):
        return len(self.hypo.get(synset, []))

    def size_below(self, synset, depth):
        return len(self.below([synset], depth))

    def below(self, synsets, depth):
        out, frontier = {}, [(s, 0) for s in synsets]
        while frontier:
            s, d = frontier.pop(0)
            for w in self.words[s]:
                out.setdefault(w, d)
            if d < depth:
                frontier += [(t, d + 1) for t in self.hypo.get(s, [])]
        return out


@pytest.mark.parametrize(
    ("word", "graph", "expected"),
    [
        ("pet", {"greyhound", "beach"}, ["greyhound"]),  # a role: the search starts one step up
        ("animal", {"greyhound", "cat", "beach"}, ["cat", "greyhound"]),  # nearest first
        ("tourney", {"tournament"}, ["tournament"]),
        ("mentor", {"mentorship", "mentor"}, ["mentorship"]),  # never the word itself
        ("pet", {"beach"}, []),  # only concepts the graph holds
        ("unknown", {"greyhound"}, []),
    ],
)
def test_related_concepts(word, graph, expected):
    assert related_concepts(word, TinyLexicon(), graph.__contains__) == expected


def test_a_word_the_graph_lacks_counts_for_half_a_seed_in_all():
    graph = {"greyhound", "cat", "tournament"}
    seeds = expansion_seeds(["pet", "tourney", "animal"], TinyLexicon(), graph.__contains__)
    half, quarter = EXPANSION_MASS, EXPANSION_MASS / 2
    assert seeds == {"greyhound": quarter + quarter, "cat": quarter + quarter, "tournament": half}
    assert MAX_PER_WORD >= 1


# Through `answer`: the three everyday questions and the empty reply

def _memory(*texts: str) -> LocalLog:
    log = LocalLog(GraphParams())
    for i, text in enumerate(texts):
        turn = Turn(graph_id="g", turn_id=f"t{i}", speaker="user", text=text, timestamp=T0 + timedelta(minutes=i))
        log.append(ingest(turn, P, extractor_id(P)))
    return log


DOG, BEACH, SISTER = ("I adopted a greyhound called Pretzel last week", "Pretzel loves the beach at Cromer",
                      "My sister Mina lives in Leeds and bakes sourdough")


def _ask(log: LocalLog, text: str, lexicon=None):
    query = ActivationQuery(request_id="q", graph_id="g", text=text, reinforce=False)
    return answer(log.state, query, ActivationParams(), P, lambda: 0.0, lexicon=lexicon, encoder=None)


def test_a_query_with_no_word_in_the_graph_says_so():
    reply = _ask(_memory(DOG, BEACH, SISTER), "What about the zorbulax?")
    assert reply.passages == () and reply.empty == "no_seeds" and reply.unmatched == ("zorbulax",)
    decoded = decode_reply(encode(reply))
    assert decoded.empty == "no_seeds" and decoded.unmatched == reply.unmatched


def test_a_version_1_reply_reads_with_no_reason():
    reply = _ask(_memory(DOG), "greyhound")
    old = reply.model_dump(mode="json", exclude={"unmatched", "expanded", "empty"}) | {"schema_version": 1}
    decoded = decode_reply(encode_dict(old))
    assert decoded.schema_version == 2 and decoded.empty is None and decoded.unmatched == ()


def encode_dict(obj: dict) -> bytes:
    import json
    return json.dumps(obj).encode()


def test_expansion_seeds_with_a_fake_lexicon_and_reports_them():
    log = _memory(DOG, BEACH, SISTER)
    seeds = find_seeds(log.state.view("g"), ActivationQuery(request_id="q", graph_id="g", text="What pets do I have?",
                                                            reinforce=False), P, TinyLexicon())
    assert seeds.ids == [] and seeds.unmatched == ["pet"] and seeds.expanded == ["greyhound"]
    reply = _ask(log, "What pets do I have?", TinyLexicon())
    # the greyhound's turn names it (Pretzel): the name is reported as reached too
    assert reply.passages[0].turn_id == "t0" and reply.seeds == () and reply.expanded == ("greyhound", "pretzel")


@needs_wordnet
@pytest.mark.parametrize(
    ("question", "first"), [("What pets do I have?", "t0"), ("Tell me about my family", "t2")]
)
def test_everyday_questions_find_their_turn_first(question, first):
    lexicon = wordnet()
    assert _ask(_memory(DOG, BEACH, SISTER), question, lexicon).passages[0].turn_id == first


@needs_wordnet
@pytest.mark.parametrize(
    ("word", "graph", "expected"),
    [("pet", {"greyhound", "leeds"}, "greyhound"), ("family", {"sister", "leeds"}, "sister"),
     ("tourney", {"tournament"}, "tournament"), ("activity", {"pottery", "leeds"}, "pottery"),
     ("dog", {"greyhound", "beach"}, "greyhound")],
)
def test_wordnet_links_category_words_to_instances(word, graph, expected):
    assert expected in related_concepts(word, wordnet(), graph.__contains__)


# Questions fused by normalised score, semantic seeds, concept vectors

@pytest.mark.parametrize(
    ("rankings", "k", "expected"),
    [
        # the forum question repeats its words: scores 9, 8, 7; the boss question scores 1
        ([[("forum1", 9.0), ("forum2", 8.0), ("forum3", 7.0)], [("boss1", 1.0), ("boss2", 0.5)]], 3,
         [("boss1", 1.0), ("forum1", 1.0), ("forum2", 8 / 9)]),
        ([[("a", 2.0), ("b", 1.0)], [("b", 4.0)]], 2, [("b", 1.5), ("a", 1.0)]),  # found by both: summed
        ([[("a", 0.0)], []], 5, []),  # a question that found nothing adds nothing
    ],
)
def test_fuse_questions(rankings, k, expected):
    fused = fuse_questions(rankings, k)
    assert [pid for pid, _ in fused] == [pid for pid, _ in expected]
    assert [score for _, score in fused] == pytest.approx([score for _, score in expected])


def _unit(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_similar_seeds_take_the_nearest_allowed_concepts_above_the_floor():
    ids = ["clarinet", "violin", "tennis", "instrument", "speaker"]
    concepts = _unit([1, 0.1, 0], [1, 0.3, 0], [0, 0, 1], [1, 0, 0], [1, 0.05, 0])
    word = _unit([1, 0, 0])
    seeds = similar_seeds(["instrument"], word, ids, concepts, lambda c: c != "speaker")
    assert list(seeds) == ["clarinet", "violin"]  # never the word itself, a disallowed one, or a far one (tennis)
    assert sum(seeds.values()) == pytest.approx(SIMILAR_MASS)
    assert similar_seeds(["x"], word, [], np.zeros((0, 3), dtype=np.float32), bool) == {}


def test_concept_vectors_encode_each_concept_once():
    log = _memory(DOG, BEACH)
    view = log.state.view("g")
    calls = []

    def encode(words):
        calls.append(list(words))
        return np.ones((len(words), 384), dtype=np.float32)

    cache = VectorCache(max_graphs=1)
    vectors = cache.of(view.ref)
    ids, matrix = vectors.current(view, cache.words, encode)
    again, _ = vectors.current(view, cache.words, encode)
    assert sorted(ids) == sorted(view.index) and matrix.shape == (len(ids), 384)
    assert again == ids and len(calls) == 1
    query = vectors.of(["greyhound", "zorbulax", "zorbulax"], cache.words, encode)
    assert query.shape == (3, 384) and calls[1:] == [["zorbulax"]]  # a concept's row is reused
    other = cache.of("another graph")
    other.current(_memory(DOG).state.view("g"), cache.words, encode)
    assert len(calls) == 2  # the words were encoded for the first graph already


def test_the_vector_cache_drops_the_least_recently_queried_graphs_past_its_rows():
    def encode(words):
        return np.ones((len(words), 384), dtype=np.float32)

    cache = VectorCache(max_graphs=10, max_rows=1)  # any two graphs with concepts are past it
    view = _memory(DOG, BEACH).state.view("g")
    first = cache.of("first")
    first.current(view, cache.words, encode)
    assert cache.rows() == len(view.index) > 1
    again = cache.of("first")  # the graph asked for is kept, however large
    assert again is first
    second = cache.of("second")
    second.current(view, cache.words, encode)
    third = cache.of("third")  # past the rows: the least recently queried graphs go
    assert third is not first and cache.of("first") is not first
    assert cache.rows() <= len(view.index)


def test_the_vector_cache_forgets_the_graphs_of_a_partition_handed_over(monkeypatch):
    from emgas.service import retrieval
    from emgas.service.retrieval import drop_vectors
    from emgas.service.semantic import VectorCache

    # The process's cache, fresh for this test: its fake vectors of real words must not
    # reach the queries of later tests (they did: the family set's after this file).
    _VECTORS = VectorCache()
    monkeypatch.setattr(retrieval, "_VECTORS", _VECTORS)

    def encode(words):
        return np.ones((len(words), 384), dtype=np.float32)

    log = _memory(DOG, BEACH)
    view = log.state.view("g")
    kept = _VECTORS.of("another worker's graph")
    kept.current(view, _VECTORS.words, encode)
    _VECTORS.of(view.ref).current(view, _VECTORS.words, encode)
    assert drop_vectors(log.state) == len(view.index) > 0  # every graph version of the partition
    assert drop_vectors(log.state) == 0 and _VECTORS.of("another worker's graph") is kept
    _VECTORS.drop(["another worker's graph"])


def test_wordnet_is_parsed_once_then_read_from_its_cache_and_parsed_again_if_the_cache_is_broken(
    tmp_path, monkeypatch, caplog,
):
    from emgas.service import wordnet as module

    source = tmp_path / "wndb"
    source.mkdir()
    (source / "data.noun").write_text("x")
    parsed = ([("dog",), ("hound", "dog")], [{"hyper": ((1, 0, 0),)}, {}], {"dog": {"n": (0,)}}, {"n": {"dogs": ("dog",)}})
    parses = []
    monkeypatch.setattr(module, "_parse", lambda directory: parses.append(directory) or parsed)
    cache = tmp_path / "a cache #1?"  # characters a file URI must quote
    first = WordNet.load(source, cache)
    again = WordNet.load(source, cache)
    assert len(parses) == 1 and read_whole(again) == read_whole(first) == parsed
    [cached] = cache.iterdir()
    cached.write_bytes(b"not a cache")
    broken = WordNet.load(source, cache)
    assert len(parses) == 2 and read_whole(broken) == parsed and "unreadable" in caplog.text
    assert broken.index.get("cat") is None and broken.words[1] == ("hound", "dog")


def read_whole(wordnet: WordNet) -> tuple:
    """A WordNet's tables read back as the parse's lists and dicts (the fake parse's sizes)."""
    synsets = range(2)
    return ([wordnet.words[s] for s in synsets], [wordnet.rel[s] for s in synsets],
            {"dog": wordnet.index["dog"]}, wordnet.exceptions)


@needs_wordnet
@pytest.mark.parametrize(
    ("words", "graph", "reached"),
    [
        (["live"], {"flat", "leeds", "live"}, {"flat"}),  # dwelling: a flat, a house
        (["live"], {"house", "cabin"}, {"house", "cabin"}),
        (["sport"], {"marathon", "payroll"}, {"marathon"}),  # a race is the sport asked about
        (["stay"], {"guest", "sofa"}, {"guest"}),
        (["stay"], {"visit", "band"}, {"visit"}),  # a visitor's visit, never a corset stay's band
        (["living"], {"work", "radiographer"}, {"work"}),  # "what do I do for a living?"
        (["运动"], {"马拉松", "花生"}, {"马拉松"}),
        (["cat"], {"flat", "marathon"}, set()),  # not a verb of these kinds
    ],
)
def test_verbs_of_dwelling_sport_and_visiting_reach_their_nouns(words, graph, reached):
    from emgas.processors.expansion import category_seeds

    assert set(category_seeds(words, wordnet(), graph.__contains__)) == reached


@needs_wordnet
def test_where_do_i_live_finds_the_flat_and_what_sport_the_race():
    memory = _memory(
        "My sister Mina lives in Leeds and bakes bread.", "Our flat in Bristol has a leak in the kitchen.",
        "I am training for the Bristol half marathon in October.", "Payroll at month end is stressful.",
    )
    lexicon = wordnet()
    assert "t1" in [p.turn_id for p in _ask(memory, "Where do I live?", lexicon).passages[:3]]
    assert _ask(memory, "What sport am I doing?", lexicon).passages[0].turn_id == "t2"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("We adopted a ginger kitten last month and named her Noodle.", ["Noodle"]),
        ("I adopted a greyhound called Pretzel last week.", ["Pretzel"]),
        ("Her name is Miso, like the soup.", ["Miso"]),
        ("我们领养了一只小猫，给它取名叫汤圆。", ["汤圆"]),
        ("Mila家养了一只柯基犬，名字叫土豆，是三年前领养的。", ["土豆"]),
        ("I called my mother on Sunday.", []),  # a lower-case word after "called" is no name
        ("The shop is named after its street.", []),
    ],
)
def test_names_given_are_read_from_naming_phrases(text, names):
    from emgas.processors.expansion import names_given

    assert names_given(text) == names


def test_a_seed_in_few_passages_passes_its_start_to_the_names_they_give_it():
    from emgas.processors.expansion import name_seeds

    passages = {"kitten": ["t1"], "sofa": ["t2"], "we": ["t1", "t2", "t3", "t4"]}
    texts = {"t1": "We got a kitten and named her Miso.", "t2": "Miso shredded the sofa.",
             "t3": "Our dog is called Rex.", "t4": "x"}
    concepts = {"miso", "rex"}

    def concept_of(name: str) -> str | None:
        return name.lower() if name.lower() in concepts else None

    seeds = name_seeds({"kitten": 0.5, "we": 1.0}, passages.get, lambda ids: [texts[t] for t in ids], concept_of)
    # "we" is in four passages (more than NAME_MAX_PASSAGES): no one thing, so Rex is not reached
    assert seeds == {"miso": (0.5, "kitten")}


def test_a_wordnet_table_reads_rows_on_demand_many_at_once_and_keeps_the_latest(monkeypatch):
    from emgas.service import wordnet_db

    reads = []
    rows = {1: ("dog",), 2: ("hound",), 3: ("cat",)}
    table = wordnet_db.Table(lambda keys: reads.append(list(keys)) or {k: rows[k] for k in keys if k in rows})
    table.fill([1, 2, 9])
    assert reads == [[1, 2, 9]] and table[1] == ("dog",) and table.get(9, "none") == "none"
    with pytest.raises(KeyError):
        table[9]
    assert reads == [[1, 2, 9]]  # held, the missing key too
    monkeypatch.setattr(wordnet_db, "CACHED_ROWS", 3)
    table.get(1)  # now the latest used
    assert table[3] == ("cat",) and reads[-1] == [3]  # 2 was the least recently used: gone
    table.fill([1, 2])
    assert reads[-1] == [2]
