"""validate(): 95% intervals, the Brier score, the expected calibration error and a reliability plot."""
from __future__ import annotations

import random

import pytest

import newrllama


def test_wilson_interval_of_the_accuracy():
    v = newrllama.validate(["a"] * 8 + ["b"] * 2, ["a"] * 10)
    # Wilson's 95% interval for 8 of 10 (Newcombe 1998, table I: 0.4902 to 0.9433).
    assert v.accuracy_ci == pytest.approx((0.4902, 0.9433), abs=5e-5)
    assert newrllama.validate(["a"] * 5, ["a"] * 5).accuracy_ci[1] == 1.0


def test_bootstrap_intervals_hold_the_estimate_repeat_and_narrow_with_more_texts():
    rng = random.Random(5)
    truth = [rng.choice("ab") for _ in range(70)]
    predicted = [t if rng.random() < 0.8 else ("b" if t == "a" else "a") for t in truth]
    v = newrllama.validate(predicted, truth)
    assert v.kappa_ci[0] < v.kappa < v.kappa_ci[1] and v.macro_f1_ci[0] < v.macro_f1 < v.macro_f1_ci[1]
    assert newrllama.validate(predicted, truth).kappa_ci == v.kappa_ci  # a fixed seed: the same data, the same interval
    big = newrllama.validate(predicted * 10, truth * 10)
    assert big.kappa == pytest.approx(v.kappa)
    assert big.kappa_ci[1] - big.kappa_ci[0] < (v.kappa_ci[1] - v.kappa_ci[0]) / 2


def test_brier_score_and_calibration_error_by_hand():
    probs = [{"a": 0.9, "b": 0.1}, {"a": 0.6, "b": 0.4}, {"a": 0.3, "b": 0.7}, None]
    v = newrllama.validate(["a", "a", "b", None], ["a", "b", "b", "a"], probs)
    # Brier: ((0.1^2 + 0.1^2) + (0.6^2 + 0.6^2) + (0.3^2 + 0.3^2)) / 3; the missing one is left out.
    assert v.brier == pytest.approx((0.02 + 0.72 + 0.18) / 3)
    # Top probabilities 0.9 (right), 0.6 (wrong), 0.7 (right): bins [0.9, 1), [0.6, 0.7), [0.7, 0.8).
    assert [(b.low, b.n, b.accuracy) for b in v.reliability] == [(0.6, 1, 0.0), (0.7, 1, 1.0), (0.9, 1, 1.0)]
    assert v.ece == pytest.approx((0.6 + 0.3 + 0.1) / 3)
    assert newrllama.validate(["a"], ["a"]).brier is None


def test_reliability_plot(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    v = newrllama.validate(["a", "b"], ["a", "a"], [{"a": 0.8, "b": 0.2}, {"a": 0.45, "b": 0.55}])
    ax = v.plot()
    ax.figure.savefig(tmp_path / "reliability.png")
    assert (tmp_path / "reliability.png").stat().st_size > 1000
    with pytest.raises(newrllama.InvalidArgumentError, match="probs"):
        newrllama.validate(["a"], ["a"]).plot()


@pytest.mark.parametrize("probs,message", [
    ([{"a": 1.0}], "has 1 entries but there are 2"), ("ab", "one dict"), ([{"a": 1.5}, None], r"\[0, 1\]"),
    ([{}, None], "must be a dict"), ([["a"], None], "must be a dict"),
])
def test_bad_probabilities_are_clear_errors(probs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.validate(["a", "a"], ["a", "a"], probs)
