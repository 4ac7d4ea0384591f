"""The passage-ranking steps after spreading: context, named speakers, sessions.

Each step has a hand-built case where it finds what the ranking without it
missed, and a case showing it leaves a single-hop answer where it was:
first on pure functions, then through `answer` on a graph built by the
same extraction and fold as a worker.
"""

from datetime import timedelta

import pytest

from emgas.processors.activation import (
    ActivationParams,
    Surroundings,
    named_speakers,
    rank_passages,
)
from emgas.processors.events import ActivationQuery, QueryParams, Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest, query_seeds
from emgas.processors.graph import GraphParams
from emgas.service.retrieval import answer
from emgas.testing import LocalLog
from tests.support.factories import T0
from tests.support.wordnet import needs_wordnet

OFF = ActivationParams(context_weight=0.0, speaker_boost=0.0, session_weight=0.0)


def conversation(*turns: tuple[str, str | None, str]) -> Surroundings:
    """Surroundings of turns given as (turn id, session, speaker key), in order."""
    order = {t: i for i, (t, _, _) in enumerate(turns)}
    session = {t: s for t, s, _ in turns}
    speaker = {t: p for t, _, p in turns}

    def neighbours(pid: str, window: int) -> list[tuple[str, int]]:
        return [(t, abs(order[t] - order[pid])) for t in order
                if t != pid and session[t] == session[pid] and abs(order[t] - order[pid]) <= window]

    return Surroundings(
        neighbours=neighbours, session_of=session.__getitem__,
        members=lambda s: [t for t in order if session[t] == s], speaker_of=speaker.__getitem__,
    )


CHAT = conversation(
    ("a1", "s1", "caroline"), ("a2", "s1", "melanie"), ("a3", "s1", "caroline"),
    ("b1", "s2", "caroline"), ("b2", "s2", "melanie"), ("b3", "s2", "caroline"), ("b4", "s2", "melanie"),
)


def ids(ranked: list[tuple[str, float]]) -> list[str]:
    return [pid for pid, _ in ranked]


def test_passages_pass_a_share_of_their_score_to_their_neighbours():
    params = OFF.model_copy(update={"context_weight": 0.3, "context_window": 1})
    ranked = rank_passages([(1.0, ["a2"]), (0.5, ["b4"])], 5, CHAT, params)
    assert ranked == [("a2", 1.0), ("b4", 0.5), ("a1", 0.3), ("a3", 0.3), ("b3", 0.15)]


@pytest.mark.parametrize(
    ("seeds", "speakers", "named"),
    [
        (["melanie", "play"], ["melanie", "caroline"], {"melanie"}),
        (["play"], ["melanie", "caroline"], set()),
        (["mary", "play"], ["mary ann", "caroline"], set()),  # half a name is not the person
        (["ann", "mary"], ["mary ann", "caroline"], {"mary ann"}),
        (["x"], [""], set()),  # a turn without a speaker names nobody
    ],
)
def test_named_speakers(seeds, speakers, named):
    assert named_speakers(seeds, speakers) == named


SPEAKER = OFF.model_copy(update={"speaker_boost": 1.0})


def test_a_named_speakers_turn_outranks_the_other_persons_reply_about_it():
    # "What does Melanie play?": Caroline's turn names Melanie and "play"
    # (1.0); Melanie's own answer shares fewer words (0.6).
    scored = [(1.0, ["a1"]), (0.6, ["a2"])]
    assert ids(rank_passages(scored, 1, CHAT, OFF)) == ["a1"]
    assert ids(rank_passages(scored, 1, CHAT, SPEAKER, frozenset({"melanie"}))) == ["a2"]


@pytest.mark.parametrize("named", [frozenset(), frozenset({"melanie", "caroline"}), frozenset({"caroline"})])
def test_the_speaker_step_leaves_a_single_hop_answer_first(named):
    # The single-hop answer a1 (Caroline's) leads by a clear margin.
    scored = [(1.0, ["a1"]), (0.3, ["a2"]), (0.2, ["b2"])]
    assert ids(rank_passages(scored, 3, CHAT, SPEAKER, named))[0] == "a1"


SESSION = OFF.model_copy(update={"session_weight": 0.3})


def test_a_session_about_the_subject_lifts_its_turn_that_uses_other_words():
    # Session s2 talks about the subject (b1, b3 score); its b4 shares no
    # word with the query. A lone weak hit a2 elsewhere ranks above b4
    # without the session step, below it with it.
    scored = [(1.0, ["b1"]), (1.0, ["b3"]), (0.1, ["a2"])]
    assert ids(rank_passages(scored, 4, CHAT, OFF)) == ["b1", "b3", "a2"]
    ranked = dict(rank_passages(scored, 7, CHAT, SESSION))
    assert ranked["b4"] == pytest.approx(0.3 * 2.0 / 4)  # s2's sum 2.0 over its 4 turns
    assert ranked["a2"] == pytest.approx(0.1 + 0.3 * 0.1 / 3)
    assert ids(rank_passages(scored, 4, CHAT, SESSION)) == ["b1", "b3", "b2", "b4"]


def test_the_session_step_leaves_a_single_hop_answer_first():
    # One strong hit in s1 against several weak ones spread over s2.
    scored = [(1.0, ["a2"]), (0.3, ["b1"]), (0.3, ["b2"]), (0.3, ["b3"])]
    assert ids(rank_passages(scored, 1, CHAT, SESSION)) == ["a2"]


def test_a_session_too_long_to_be_a_context_shares_nothing():
    from emgas.processors import activation

    turns = [(f"t{i:04}", "all", "a") for i in range(activation.SESSION_CONTEXT_MAX + 1)]
    stream = conversation(*turns)
    assert rank_passages([(1.0, ["t0000"])], 3, stream, SESSION) == [("t0000", 1.0)]


def test_turns_without_a_session_share_nothing():
    lone = conversation(("x1", None, "a"), ("x2", None, "b"))
    assert rank_passages([(1.0, ["x1"])], 5, lone, SESSION) == [("x1", 1.0)]


# Through `answer`, on graphs built by the worker's extraction and fold.

def build(turns: list[tuple[str, str, str, str]]) -> LocalLog:
    """A graph 'g' from (turn id, session, speaker, text)."""
    extraction = ExtractionParams()
    log = LocalLog(GraphParams())
    for i, (turn_id, session, speaker, text) in enumerate(turns):
        turn = Turn(graph_id="g", turn_id=turn_id, speaker=speaker, text=text,
                    timestamp=T0 + timedelta(minutes=i), session_id=session)
        log.append(ingest(turn, extraction, extractor_id(extraction)))
    return log


def ask(log: LocalLog, text: str, params: ActivationParams, k: int) -> list[str]:
    query = ActivationQuery(request_id="q", graph_id="g", text=text, reinforce=False,
                            params=QueryParams(top_passages=k))
    return [p.turn_id for p in answer(log.state, query, params, ExtractionParams(), lambda: 0.0).passages]


OLD = ActivationParams(speaker_boost=0.0, session_weight=0.0, expansion=False, semantic=False)
NEW = ActivationParams()

MUSIC = [
    ("s1:1", "1", "Caroline", "Melanie, do you still play music these days?"),
    ("s1:2", "1", "Melanie", "Yes! The clarinet, every evening after the kids sleep."),
    ("s1:3", "1", "Caroline", "Lovely. I should pick up a hobby again."),
    ("s2:1", "2", "Caroline", "The kids play football in the park on Sundays."),
    ("s2:2", "2", "Caroline", "We play board games when it rains."),
    ("s2:3", "2", "Melanie", "Board games are fun, I agree."),
    ("s3:1", "3", "Caroline", "I play tennis at the club near work."),
    ("s3:2", "3", "Melanie", "Tennis sounds tiring."),
]


@needs_wordnet  # instrument -> clarinet is a WordNet hyponym
def test_answer_finds_the_named_persons_reply_that_shares_no_word_with_the_question():
    log = build(MUSIC)
    question = "What instrument does Melanie play?"
    assert ask(log, question, OLD, 2) == ["s1:1", "s2:1"]  # Caroline's turns that name "play"
    assert ask(log, question, NEW, 1) == ["s1:2"]  # Melanie's own answer


def test_answer_keeps_a_single_hop_answer_first():
    log = build(MUSIC)
    for params in (OLD, NEW):
        assert ask(log, "Where does Caroline play tennis?", params, 1) == ["s3:1"]


def test_a_possessive_is_the_name_itself():
    assert "joanna" in query_seeds("What is Joanna's third screenplay about?", ExtractionParams())
    log = build([("t1", "1", "Nate", "Joanna finished a screenplay about a lost dog."),
                 ("t2", "1", "Joanna", "Thanks! It took me a year."),
                 ("t3", "2", "Nate", "My turtles need a bigger tank.")])
    assert ask(log, "What is Joanna's screenplay about?", NEW, 1) == ["t1"]


def test_the_view_keeps_speakers_and_sessions_as_passages_come_and_go():
    from emgas.processors.graph import GraphRef, Passage
    from emgas.processors.dynamics import DecayParams
    from emgas.state.view import GraphView

    view = GraphView(GraphRef("g", 0), DecayParams())
    for seq, (turn_id, session, speaker) in enumerate([("a", "1", "Joanna"), ("b", "1", "Nate"), ("c", "2", "Joanna")]):
        view.place(Passage(turn_id=turn_id, speaker=speaker, text="x", timestamp=T0, session_id=session,
                           concept_ids=(), seq=seq))
    assert view.speakers() == {"joanna", "nate"} and list(view.members("1")) == ["a", "b"]
    assert view.surroundings().speaker_of("c") == "joanna" and view.session_of("c") == "2"
    view.forget_passage("b")
    assert view.speakers() == {"joanna"} and list(view.members("1")) == ["a"]
    view.forget_passage("c")
    assert "2" not in view.session_turns and view.session_of("c") is None
    # A turn placed again (in another session) is filed once, in its new place.
    view.place(Passage(turn_id="a", speaker="Nate", text="x", timestamp=T0, session_id="3", concept_ids=(), seq=5))
    assert "1" not in view.session_turns and list(view.members("3")) == ["a"] and view.speakers() == {"nate"}


# Properties over random conversations and scores.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from emgas.processors.activation import boost_speakers, share_with_sessions  # noqa: E402

SPEAKERS = ["ann", "bob", "cy"]


@st.composite
def scored_conversations(draw: st.DrawFn) -> tuple[Surroundings, dict[str, float]]:
    """A random conversation (turns t00, t01, … with a session or none and a
    speaker) and scores for some of its turns."""
    turns = draw(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3", None]), st.sampled_from(SPEAKERS)),
                          min_size=1, max_size=30))
    ids_ = [f"t{i:02}" for i in range(len(turns))]
    chat = conversation(*[(t, s, p) for t, (s, p) in zip(ids_, turns)])
    return chat, draw(st.dictionaries(st.sampled_from(ids_), st.floats(min_value=0.0, max_value=10.0)))


@settings(max_examples=200, deadline=None)
@given(scored_conversations(), st.floats(min_value=0.0, max_value=1.0))
def test_sessions_share_exactly_weight_times_their_sum_and_lower_nothing(chat_and_scores, weight):
    chat, scored = chat_and_scores
    out = share_with_sessions(scored, chat, weight)
    assert all(out.get(pid, 0.0) >= score for pid, score in scored.items())
    in_sessions = sum(score for pid, score in scored.items() if chat.session_of(pid) is not None)
    added = sum(out.values()) - sum(scored.values())
    assert added == pytest.approx(weight * in_sessions, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(scored_conversations(), st.sets(st.sampled_from(SPEAKERS)), st.floats(min_value=0.0, max_value=10.0))
def test_the_speaker_step_multiplies_the_named_and_keeps_the_order_within_each_group(chat_and_scores, named, boost):
    chat, scored = chat_and_scores
    named = frozenset(named)
    out = boost_speakers(scored, chat, named, boost)
    for pid, score in scored.items():
        factor = 1.0 + boost if chat.speaker_of(pid) in named else 1.0
        assert out[pid] == score * factor
    # Within the named persons' turns, and within the others', no pair swaps.
    for p in scored:
        for q in scored:
            same_group = (chat.speaker_of(p) in named) == (chat.speaker_of(q) in named)
            if same_group and scored[p] > scored[q]:
                assert out[p] >= out[q]
