"""A passage's score: the query's seeds count all of their score, concepts
reached by spreading only `association_weight` of theirs
(`processors.activation.seeded_scores`)."""

import numpy as np
import pytest

from emgas.processors.activation import rank_passages, seeded_scores


@pytest.mark.parametrize(
    "weight, expected",
    [
        (0.5, [0.8, 0.2, 0.05]),
        (1.0, [0.8, 0.4, 0.1]),  # every concept alike: the sum of the top concepts
        (0.0, [0.8, 0.0, 0.0]),  # the seeds' passages only
    ],
)
def test_seeds_count_whole_and_associations_at_their_weight(weight, expected):
    scores = np.array([0.8, 0.4, 0.1])
    added = seeded_scores(scores, [0, 1, 2], {0}, weight)
    assert [i for _, i in added] == [0, 1, 2]
    assert [score for score, _ in added] == pytest.approx(expected)


def test_an_echo_of_one_seed_does_not_outrank_a_passage_sharing_more_of_the_query():
    # Passage "a" shares the query's seeds 0 and 1; passage "b" shares seed 2
    # with no other passage, so spreading left seed 2's energy in b's other
    # five concepts (3..7). Summed alike, b's echo wins; seeds whole, a does.
    scores = np.array([0.2, 0.2, 0.2, 0.06, 0.06, 0.06, 0.06, 0.06])
    passages = [["a"], ["a"], ["b"], ["b"], ["b"], ["b"], ["b"], ["b"]]
    top, seeds = range(8), {0, 1, 2}

    def ranked(weight: float) -> list[str]:
        added = seeded_scores(scores, top, seeds, weight)
        return [pid for pid, _ in rank_passages(((s, passages[i]) for s, i in added), 2)]

    assert ranked(1.0) == ["b", "a"]
    assert ranked(0.5) == ["a", "b"]
