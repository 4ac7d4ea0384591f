"""Ten plain facts about a family, asked the way a new user asks through an
MCP client (`tests/data/everyday`, everyday-family-*): how many questions get
the right passage first. Issue 36's goal is 10 of 12 in English."""

from pathlib import Path

import pytest

from emgas.processors.activation import ActivationParams
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.tools.baselines import retrievers
from emgas.tools.evaluation import build, load
from tests.support.wordnet import needs_wordnet

DATA = Path(__file__).resolve().parents[2] / "data" / "everyday"
# conversation -> questions whose evidence must come first (measured: 10 and 7; docs/retrieval.md)
FIRST = {"everyday-family-en": 10, "everyday-family-zh": 7}

pytestmark = needs_wordnet


def firsts(conversation: str) -> list[str]:
    turns, questions = load(DATA, (conversation,))
    extraction = ExtractionParams()
    log = build(turns[conversation], GraphParams(), extraction)
    emgas = retrievers(log.state, conversation, ActivationParams(), extraction, 10)["emgas"]
    return [q.text for q in questions if emgas(q.text)[:1] == sorted(q.evidence)]


@pytest.mark.parametrize("conversation", sorted(FIRST))
def test_the_right_passage_comes_first(conversation):
    found = firsts(conversation)
    assert len(found) >= FIRST[conversation], found


def test_a_thing_is_found_under_the_name_it_was_given():
    # "Which piece of furniture did the kitten ruin?": the kitten was named
    # Noodle in one turn, and Noodle scratched the table in a later one.
    assert "Which piece of furniture did the kitten ruin?" in firsts("everyday-family-en")
