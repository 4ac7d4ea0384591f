"""What a person sees of a query's answer (`emgas query`, `emgas demo`)."""

from datetime import datetime, timezone

import pytest

from emgas.processors.chinese import is_fragment
from emgas.processors.events import ActivationReply, GraphStats, RankedConcept, RankedPassage, Timings
from emgas.streams.cli.main import format_reply, shown_concepts

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def reply(concepts, passages=(), expanded=(), unmatched=()):
    return ActivationReply(
        request_id="r", graph_id="g", seeds=("x",),
        concepts=tuple(RankedConcept(id=t, text=t, activation=a, score=1.0) for t, a in concepts),
        passages=tuple(
            RankedPassage(turn_id=f"t{i}", speaker="u", text=text, timestamp=AT, score=1.0)
            for i, text in enumerate(passages)
        ),
        iterations=1, stats=GraphStats(turns=1, concepts=1),
        timings=Timings(extract_ms=0, spread_ms=0, rank_ms=0, total_ms=0),
        expanded=tuple(expanded), unmatched=tuple(unmatched),
    )


@pytest.mark.parametrize(
    "concepts, shown",
    [
        ([("cat", 0.2), ("sofa", 0.9), ("miso", 0.5)], ["sofa", "miso", "cat"]),
        ([("b", 0.5), ("a", 0.5), ("c", 1.0)], ["c", "a", "b"]),  # ties by id
        ([("论坛", 0.3), ("融科", 0.9), ("科技", 0.6)], ["科技", "论坛"]),  # 融科 spans two words
        ([("根的", 0.8), ("去卑", 0.7), ("末还", 0.6), ("身高", 0.1)], ["身高"]),
        ([("kafka", 0.4), ("论坛", 0.5)], ["论坛", "kafka"]),
        ([], []),
    ],
)
def test_concepts_are_shown_by_activation_without_fragments(concepts, shown):
    assert [c.text for c in shown_concepts(reply(concepts))] == shown


@pytest.mark.parametrize(
    "term, nearby, fragment",
    [
        ("论坛", (), False),       # a dictionary word
        ("融科", (), True),        # 金融|科技: across a word boundary
        ("的地", (), True),
        ("同事身高", (), False),   # longer than a bigram: a jieba word
        ("cat", (), False),        # not Chinese
        ("张伟", (), True),        # a name jieba's dictionary lacks...
        ("张伟", ("张伟",), False),  # ...unless cut as a word from its passage
    ],
)
def test_a_fragment_is_a_bigram_that_is_no_word(term, nearby, fragment):
    assert is_fragment(term, nearby) is fragment


def test_a_name_found_as_a_word_in_a_returned_passage_is_shown():
    shown = shown_concepts(reply([("小明", 0.5), ("融科", 0.4)], passages=["小明在金融科技论坛上发言"]))
    assert [c.text for c in shown] == ["小明"]


@pytest.mark.parametrize(
    "expanded, unmatched, line",
    [
        (("greyhound",), ("pet",), "related: greyhound (for pet)"),
        (("start",), (), "related: start"),  # semantic seeds of words the graph has
        ((), ("pet",), None),
    ],
)
def test_the_related_line_names_what_it_stands_for_only_when_there_is_something(expanded, unmatched, line):
    lines = format_reply(reply([("cat", 0.5)], expanded=expanded, unmatched=unmatched)).splitlines()
    related = [x for x in lines if x.startswith("related")]
    assert related == ([line] if line else [])
    assert not any("(for )" in x for x in lines)
