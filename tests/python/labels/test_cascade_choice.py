"""A cascade's share chosen from a coded sample, without a model: the first model errs on its least sure texts, the
second model is right on them, and the choice is the smallest share that takes them."""
from __future__ import annotations

import pytest

import newrllama

LABELS = ["a", "b"]


def annotation(label: str, margin: float) -> newrllama.Annotation:
    top = (1 + margin) / 2
    return newrllama.Annotation(label, {x: top if x == label else 1 - top for x in LABELS})


def other(label: str) -> str:
    return "b" if label == "a" else "a"


def corpus():
    """100 texts, truth alternating in pairs; the first model wrong on the 20 it is least sure of (margins 0.01-0.20), right
    on the rest (0.5 and up); every other text coded."""
    truth = [LABELS[(i // 2) % 2] for i in range(100)]
    first = [annotation(other(t), 0.01 * (i + 1)) if i < 20 else annotation(t, 0.5 + 0.004 * i)
             for i, t in enumerate(truth)]
    codes = [t if i % 2 == 0 else None for i, t in enumerate(truth)]
    return truth, first, codes


def test_the_smallest_share_that_reaches_the_best_agreement_is_chosen():
    truth, first, codes = corpus()
    coded = [i for i, c in enumerate(codes) if c is not None]
    second = [annotation(truth[i], 0.9) for i in coded]  # the second model is right everywhere
    choice = newrllama.choose_cascade_share(first, codes, second)
    assert choice.share == 0.2 and choice.first_kappa == pytest.approx(0.6)
    assert dict(choice.by_share)[0.2] == pytest.approx(1.0) and dict(choice.by_share)[0.1] < 1.0
    assert choice.n_coded == 50 and [r["share"] for r in choice.rows() if r["chosen"]] == [0.2]
    cascade = choice.cascade("second.gguf")
    assert cascade.share == 0.2 and cascade.chosen(first) == list(range(20))
    # Where the second model is no better, a tolerance keeps the smallest share.
    same = [first[i] for i in coded]
    assert newrllama.choose_cascade_share(first, codes, same).share == 0.05


def test_bad_input_is_a_clear_error():
    truth, first, codes = corpus()
    with pytest.raises(newrllama.InvalidArgumentError, match="second has 3 annotations for the 50 coded texts"):
        newrllama.choose_cascade_share(first, codes, first[:3])
    with pytest.raises(newrllama.InvalidArgumentError, match="each share must be a number in"):
        newrllama.choose_cascade_share(first, codes, first[:50], shares=[0])
    with pytest.raises(newrllama.InvalidArgumentError, match="truth has 2 codes"):
        newrllama.choose_cascade_share(first, codes[:2], first[:50])
