"""validate() and agreement(): checked against published figures and against the PyPI package krippendorff."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import newrllama

N = None
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders x 12 units, missing values.
KRIPPENDORFF_EXAMPLE = [[1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
                        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
                        [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
                        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N]]


@pytest.mark.parametrize("level,published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_alpha_matches_krippendorffs_published_example(level, published):
    result = newrllama.agreement(KRIPPENDORFF_EXAMPLE, level)
    assert round(result.alpha, 3) == published
    assert result.n_units == 11 and result.n_coders == 4  # the unit with one rating is left out
    as_array = np.array([[np.nan if x is None else x for x in row] for row in KRIPPENDORFF_EXAMPLE], dtype=float)
    assert newrllama.agreement(as_array, level).alpha == pytest.approx(result.alpha)


def test_alpha_agrees_with_the_krippendorff_package_on_random_data():
    krippendorff = pytest.importorskip("krippendorff")
    rng = random.Random(3)
    for trial in range(30):
        coders, units = rng.randint(2, 6), rng.randint(3, 40)
        data = [[rng.choice([1, 2, 3, 4, 5, None]) for _ in range(units)] for _ in range(coders)]
        data[0][0], data[1][0], data[0][1], data[1][1] = 1, 2, 3, 3  # variation, and pairable units
        array = np.array([[np.nan if x is None else x for x in row] for row in data], dtype=float)
        for level in ("nominal", "ordinal", "interval"):
            expected = krippendorff.alpha(reliability_data=array, level_of_measurement=level)
            assert newrllama.agreement(data, level).alpha == pytest.approx(expected, abs=1e-9), (trial, level)


def test_agreement_with_string_labels_and_perfect_agreement():
    labels = [["acq", "crude", "acq", None], ["acq", "crude", "acq", "crude"], ["acq", "crude", None, "crude"]]
    result = newrllama.agreement(labels)
    assert result.alpha == pytest.approx(1.0) and result.percent_agreement == 1.0
    assert math.isnan(newrllama.agreement([["a", "a"], ["a", "a"]]).alpha)  # no variation: undefined


def test_agreement_rejects_bad_input():
    with pytest.raises(newrllama.InvalidArgumentError, match="level"):
        newrllama.agreement(KRIPPENDORFF_EXAMPLE, "ratio")
    with pytest.raises(newrllama.InvalidArgumentError, match="one rating per unit"):
        newrllama.agreement([[1, 2, 3], [1, 2]])
    with pytest.raises(newrllama.InvalidArgumentError, match="two or more ratings"):
        newrllama.agreement([[1, N, N], [N, 2, N]])
    with pytest.raises(newrllama.InvalidArgumentError, match="numbers"):
        newrllama.agreement([["a", "b"], ["a", "c"]], "interval")
    with pytest.raises(newrllama.InvalidArgumentError, match="coders"):
        newrllama.agreement("abc")


def test_validate_figures_by_hand():
    v = newrllama.validate(["a", "b", "a", None, "c"], ["a", "b", "b", "a", None])
    assert v.n == 4 and v.n_missing == 1 and v.accuracy == 0.5
    # p_o = 2/4; p_e = (2 truth a x 2 predicted a + 2 truth b x 1 predicted b) / 16
    assert v.kappa == pytest.approx((0.5 - 6 / 16) / (1 - 6 / 16))
    assert v.per_label["a"].precision == 0.5 and v.per_label["a"].recall == 0.5
    assert v.per_label["b"].precision == 1.0 and v.per_label["b"].recall == 0.5
    assert v.macro_f1 == pytest.approx((0.5 + 2 / 3) / 2)
    assert v.confusion == {"a": {"a": 1, None: 1}, "b": {"b": 1, "a": 1}}
    perfect = newrllama.validate(["x", "y"], ["x", "y"])
    assert perfect.accuracy == 1.0 and perfect.kappa == 1.0 and perfect.macro_f1 == 1.0


def test_validate_a_constant_predictor_has_zero_kappa():
    truth = ["acq"] * 50 + ["crude"] * 20
    v = newrllama.validate(["acq"] * 70, truth)
    assert v.accuracy == pytest.approx(50 / 70) and v.kappa == pytest.approx(0.0)
    assert v.per_label["crude"].f1 == 0.0


def test_validate_rejects_bad_input():
    with pytest.raises(newrllama.InvalidArgumentError, match="has 2 labels but truth has 1"):
        newrllama.validate(["a", "b"], ["a"])
    with pytest.raises(newrllama.InvalidArgumentError, match="single string"):
        newrllama.validate("ab", "ab")
    with pytest.raises(newrllama.InvalidArgumentError, match="known truth"):
        newrllama.validate(["a"], [None])
