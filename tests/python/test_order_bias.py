"""Order-free label scores: each cure takes a place's pull out of the scores (order_bias.py)."""
from __future__ import annotations

import math
import random

import pytest

from newrllama.order_bias import order_free_scores, place_prior, sample_of, scoring_jobs

K = 4
PRIOR = [1.5, 0.2, -0.4, -1.3]  # what standing at each place adds to a label's log-probability


def observed(true_scores, rotation, noise=0.0, rng=None):
    """Log-probabilities with the labels listed in rotation r: label k stands at place (k - r) mod K."""
    raw = [true_scores[k] + PRIOR[(k - rotation) % K] + (rng.gauss(0, noise) if rng else 0.0) for k in range(K)]
    top = max(raw)
    norm = top + math.log(sum(math.exp(v - top) for v in raw))
    return [v - norm for v in raw]


def texts(n, seed=1):
    rng = random.Random(seed)
    return [[rng.gauss(0, 2) for _ in range(K)] for _ in range(n)]


def centred(v):
    return [x - sum(v) / len(v) for x in v]


def test_jobs_per_cure():
    ids = list(range(20))
    assert scoring_jobs("none", ids, K) == [(i, 0) for i in ids] == scoring_jobs("batch", ids, K)
    assert len(scoring_jobs("rotations", ids, K)) == 20 * K
    sample = sample_of(ids, K)
    assert len(sample) == 20 // (2 * (K - 1)) == 3 and len(set(sample)) == 3
    assert len(scoring_jobs("prior", ids, K)) == 20 + 3 * (K - 1) <= 1.5 * 20
    assert sample_of([7], 8) == [7] and sample_of([], 3) == []


def test_rotations_and_prior_remove_a_positional_pull_exactly():
    truths = texts(30)
    all_rotations = {i: {r: observed(t, r) for r in range(K)} for i, t in enumerate(truths)}
    free = order_free_scores("rotations", all_rotations, K)
    for i, t in enumerate(truths):
        assert centred(free[i]) == pytest.approx(centred(t), abs=1e-9)
    sample = set(sample_of(list(range(30)), K))
    prior_scores = {i: (all_rotations[i] if i in sample else {0: all_rotations[i][0]}) for i in range(30)}
    free = order_free_scores("prior", prior_scores, K)
    for i, t in enumerate(truths):
        assert centred(free[i]) == pytest.approx(centred(t), abs=1e-9)
    none = order_free_scores("none", prior_scores, K)
    assert centred(none[5]) != pytest.approx(centred(truths[5]), abs=0.1)


def test_the_prior_is_estimated_through_noise():
    rng = random.Random(2)
    truths = texts(40, seed=3)
    scores = {i: {r: observed(t, r, 0.3, rng) for r in range(K)} for i, t in enumerate(truths)}
    averaged = {i: [sum(s[r][k] for r in s) / K for k in range(K)] for i, s in scores.items()}
    assert place_prior(scores, averaged, K) == pytest.approx(centred(PRIOR), abs=0.15)
    assert place_prior({}, {}, K) == [0.0] * K


def test_batch_calibration_divides_by_the_mean_probability():
    scores = {0: {0: [math.log(0.9), math.log(0.1)]}, 1: {0: [math.log(0.5), math.log(0.5)]}}
    free = order_free_scores("batch", scores, 2)
    # mean probabilities 0.7 and 0.3
    assert free[0] == pytest.approx([math.log(0.9 / 0.7), math.log(0.1 / 0.3)])
