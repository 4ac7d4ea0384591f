"""Character seeds: a Chinese query character that no seed holds reaches the
concepts containing it (`processors.expansion.character_seeds`)."""

import pytest

from emgas.processors.chinese import characters
from emgas.processors.expansion import character_seeds


@pytest.mark.parametrize(
    "text, chars",
    [
        ("那辆车是怎么丢的来着？", ["辆", "车", "怎", "丢", "来"]),  # 那, 是, 的, 着 say nothing
        ("我的猫", ["猫"]),
        ("Leo的车车", ["车"]),  # once each
        ("no Chinese", []),
    ],
)
def test_characters_leave_out_function_characters(text, chars):
    assert characters(text) == chars


INDEX = {"车": ["买车", "自行车", "行车"], "猫": ["橘猫"], "的": [f"x{i}的" for i in range(40)]}


@pytest.mark.parametrize(
    "chars, allowed, max_concepts, seeds",
    [
        (["车"], lambda c: True, 30, {"买车": 0.5 / 3, "自行车": 0.5 / 3, "行车": 0.5 / 3}),
        (["车", "猫"], lambda c: True, 30, {"买车": 0.5 / 3, "自行车": 0.5 / 3, "行车": 0.5 / 3, "橘猫": 0.5}),
        (["车"], lambda c: c != "买车", 30, {"自行车": 0.25, "行车": 0.25}),  # already a seed: left out
        (["的"], lambda c: True, 30, {}),  # in too many concepts: says little
        (["车"], lambda c: True, 2, {}),
        (["狗"], lambda c: True, 30, {}),
    ],
)
def test_a_character_shares_its_mass_among_the_concepts_containing_it(chars, allowed, max_concepts, seeds):
    found = character_seeds(chars, lambda ch: INDEX.get(ch, []), allowed, 0.5, max_concepts)
    assert found == pytest.approx(seeds)
