"""Order-free label scores: each debias method takes a place's pull out of the scores (order_bias.py)."""
from __future__ import annotations

import math
import random

import pytest

from newrllama.labels.order_bias import (base_order, content_free_log_probs, order_free_scores, place_prior, rotations,
                                        sample_of, scoring_jobs)

LABELS = ("a", "b", "c", "d")
K = len(LABELS)
PRIOR = [1.5, 0.2, -0.4, -1.3]  # what standing at each place adds to a label's log-probability


def observed(true_scores, order, noise=0.0, rng=None):
    """Log-probabilities (by label, in LABELS' order) with the labels listed in ``order``."""
    raw = [true_scores[k] + PRIOR[order.index(label)] + (rng.gauss(0, noise) if rng else 0.0)
           for k, label in enumerate(LABELS)]
    top = max(raw)
    norm = top + math.log(sum(math.exp(v - top) for v in raw))
    return [v - norm for v in raw]


def texts(n, seed=1):
    rng = random.Random(seed)
    return [[rng.gauss(0, 2) for _ in range(K)] for _ in range(n)]


def centred(v):
    return [x - sum(v) / len(v) for x in v]


def test_jobs_per_debias_method():
    ids = list(range(20))
    assert scoring_jobs("none", ids, LABELS) == [(i, LABELS) for i in ids] == scoring_jobs("batch", ids, LABELS)
    assert scoring_jobs("reverse", ids, LABELS)[:2] == [(0, LABELS), (0, ("d", "c", "b", "a"))]
    assert len(scoring_jobs("reverse", ids, LABELS)) == 40 and len(scoring_jobs("rotations", ids, LABELS)) == 20 * K
    assert rotations("abc") == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")]
    sample = sample_of(ids, K)
    assert len(sample) == 20 // (2 * (K - 1)) == 3 and len(set(sample)) == 3
    assert len(scoring_jobs("prior", ids, LABELS)) == 20 + 3 * (K - 1) <= 1.5 * 20
    assert sample_of([7], 8) == [7] and sample_of([], 3) == []


def test_rotations_and_prior_remove_a_positional_pull_exactly():
    truths = texts(30)
    every = {i: {o: observed(t, o) for o in rotations(LABELS)} for i, t in enumerate(truths)}
    free = order_free_scores("rotations", every, LABELS, LABELS)
    for i, t in enumerate(truths):
        assert centred(free[i]) == pytest.approx(centred(t), abs=1e-9)
    sample = set(sample_of(list(range(30)), K))
    prior_scores = {i: (every[i] if i in sample else {LABELS: every[i][LABELS]}) for i in range(30)}
    free = order_free_scores("prior", prior_scores, LABELS, LABELS)
    for i, t in enumerate(truths):
        assert centred(free[i]) == pytest.approx(centred(t), abs=1e-9)
    none = order_free_scores("none", prior_scores, LABELS, LABELS)
    assert centred(none[5]) != pytest.approx(centred(truths[5]), abs=0.1)


def test_reverse_cancels_a_pull_that_changes_steadily_along_the_list():
    global PRIOR
    saved, PRIOR = PRIOR, [0.9, 0.3, -0.3, -0.9]  # linear in the place
    try:
        truths = texts(10)
        listed, shuffled = LABELS, ("c", "a", "d", "b")
        for order in (listed, shuffled):
            scores = {i: {o: observed(t, o) for o in (order, order[::-1])} for i, t in enumerate(truths)}
            free = order_free_scores("reverse", scores, LABELS, order)
            for i, t in enumerate(truths):
                assert centred(free[i]) == pytest.approx(centred(t), abs=1e-9)
    finally:
        PRIOR = saved


def test_the_prior_is_estimated_through_noise():
    rng = random.Random(2)
    truths = texts(40, seed=3)
    scores = {i: {o: observed(t, o, 0.3, rng) for o in rotations(LABELS)} for i, t in enumerate(truths)}
    averaged = {i: [sum(s[o][k] for o in s) / K for k in range(K)] for i, s in scores.items()}
    assert place_prior(scores, averaged, LABELS) == pytest.approx(centred(PRIOR), abs=0.15)
    assert place_prior({}, {}, LABELS) == [0.0] * K


def test_batch_calibration_divides_by_the_mean_probability():
    two = ("x", "y")
    scores = {0: {two: [math.log(0.9), math.log(0.1)]}, 1: {two: [math.log(0.5), math.log(0.5)]}}
    free = order_free_scores("batch", scores, two, two)
    # mean probabilities 0.7 and 0.3
    assert free[0] == pytest.approx([math.log(0.9 / 0.7), math.log(0.1 / 0.3)])


def test_every_debias_method_but_none_starts_from_the_sorted_labels():
    given = ("crude oil", "earnings", "Acquisition")
    for debias in ("reverse", "rotations", "prior", "batch", "contextual"):
        assert base_order(debias, given) == base_order(debias, given[::-1]) == ("Acquisition", "crude oil", "earnings")
    assert base_order("none", given) == given


def test_contextual_calibration_divides_by_the_content_free_probability_whatever_the_other_texts():
    two = ("x", "y")
    assert scoring_jobs("contextual", [0, 1], two) == [(0, two), (1, two)]
    correction = content_free_log_probs([[0.8, 0.2], [0.6, 0.4]])  # mean probabilities 0.7 and 0.3
    assert correction == pytest.approx([math.log(0.7), math.log(0.3)])
    scores = {0: {two: [math.log(0.9), math.log(0.1)]}, 1: {two: [math.log(0.5), math.log(0.5)]}}
    free = order_free_scores("contextual", scores, two, two, {0: correction, 1: correction})
    assert free[0] == pytest.approx([math.log(0.9 / 0.7), math.log(0.1 / 0.3)])
    alone = order_free_scores("contextual", {0: scores[0]}, two, two, {0: correction})
    assert alone[0] == free[0]  # unlike "batch", a text's scores do not depend on the other texts
    with pytest.raises(ValueError, match="content-free"):
        order_free_scores("contextual", scores, two, two)
