"""PPMI and specificity against hand-computed values."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emgas.processors.association import outgoing_weights, ppmi, ppmi_norm, specificity


@pytest.mark.parametrize(
    ("pair", "cx", "cy", "n", "expected"),
    [
        # p(x,y)=2/10, p(x)=4/10, p(y)=2/10: log(0.2 / 0.08) = log(2.5)
        (2, 4, 2, 10, math.log(2.5)),
        # independent: p(x,y) = p(x)p(y) -> 0
        (1, 2, 5, 10, 0.0),
        # negative PMI is clipped: log(1*10/(5*5)) = log(0.4) < 0
        (1, 5, 5, 10, 0.0),
        # never together
        (0, 3, 3, 10, 0.0),
        # always together, rare: log(1*100/(1*1))
        (1, 1, 1, 100, math.log(100)),
    ],
)
def test_ppmi_hand_computed(pair, cx, cy, n, expected):
    assert ppmi(np.array([pair]), cx, np.array([cy]), n)[0] == pytest.approx(expected)


def test_ppmi_norm_is_ppmi_over_minus_log_joint():
    # p(x,y) = 2/10: normalised = log(2.5) / -log(0.2)
    got = ppmi_norm(np.array([2.0]), 4, np.array([2.0]), 10)[0]
    assert got == pytest.approx(math.log(2.5) / -math.log(0.2))


def test_ppmi_norm_of_pair_in_every_turn_is_zero():
    assert ppmi_norm(np.array([5.0]), 5, np.array([5.0]), 5)[0] == 0.0


@given(
    st.integers(1, 50), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)
)
def test_ppmi_norm_bounded_and_symmetric(n, a, b, ab):
    cx, cy = min(a, n) or 1, min(b, n) or 1
    pair = min(ab, cx, cy)
    w_xy = ppmi_norm(np.array([pair]), cx, np.array([cy]), n)[0]
    w_yx = ppmi_norm(np.array([pair]), cy, np.array([cx]), n)[0]
    assert 0.0 <= w_xy <= 1.0 + 1e-12
    assert w_xy == pytest.approx(w_yx)


def test_fan_normalised_weights_sum_to_one():
    w = outgoing_weights("ppmi", True, np.array([1.0, 2.0]), 2, np.array([1.0, 2.0]), 10)
    assert w.sum() == pytest.approx(1.0)
    raw = ppmi(np.array([1.0, 2.0]), 2, np.array([1.0, 2.0]), 10)
    assert w == pytest.approx(raw / raw.sum())


@pytest.mark.parametrize(
    ("count", "n", "expected"), [(10, 10, 0.0), (1, 10, 1.0), (10, 100, 0.5), (3, 1, 1.0)]
)
def test_specificity(count, n, expected):
    assert specificity(np.array([count]), n)[0] == pytest.approx(expected)
