"""The design of the coded sample travels with the codes: finite-population correction, strata, picked texts."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import newrllama

LABELS = ["acquisition", "crude oil", "earnings"]


def annotations_for(rng, truth, accuracy=0.8):
    out = []
    for t in truth:
        label = t if rng.random() < accuracy else str(rng.choice([x for x in LABELS if x != t]))
        p = 0.5 * rng.dirichlet(np.ones(len(LABELS))) + 0.5 * (np.array(LABELS) == label)
        out.append(newrllama.Annotation(label, dict(zip(LABELS, p.tolist()))))
    return out


def test_with_most_texts_coded_the_finite_interval_is_narrower_and_still_covers():
    """70 texts, 40 coded (as with the Reuters stories): the share among these 70 is nearly known."""
    rng = np.random.default_rng(5)
    truth = [str(t) for t in rng.choice(LABELS, size=70, p=[0.5, 0.3, 0.2])]
    annotations = annotations_for(rng, truth, 0.7)
    true_share = truth.count("crude oil") / len(truth)
    covered, widths, published = 0, [], []
    draws = 400
    for _ in range(draws):
        coded = set(rng.choice(len(truth), 40, replace=False).tolist())
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        s = newrllama.prevalence(annotations, codes).share("crude oil")
        covered += s.lower <= true_share <= s.upper
        widths.append(s.upper - s.lower)
        p = newrllama.prevalence(annotations, codes, design=newrllama.CodingDesign.random(finite=False))
        published.append(p.share("crude oil").upper - p.share("crude oil").lower)
    assert covered >= 0.92 * draws
    assert np.median(widths) < 0.8 * np.median(published)


def test_every_text_coded_gives_the_coded_share_exactly():
    rng = np.random.default_rng(2)
    truth = [str(t) for t in rng.choice(LABELS, size=30)]
    s = newrllama.prevalence(annotations_for(rng, truth), truth).share("earnings")
    assert s.estimate == pytest.approx(truth.count("earnings") / 30) and s.lower == s.upper == s.estimate


def strata_population(rng):
    """Two sources: wires (mostly acquisitions) and blogs (mostly earnings), the model worse on blogs."""
    truth = ([str(t) for t in rng.choice(LABELS, size=200, p=[0.8, 0.15, 0.05])]
             + [str(t) for t in rng.choice(LABELS, size=600, p=[0.1, 0.2, 0.7])])
    source = ["wire"] * 200 + ["blog"] * 600
    annotations = annotations_for(rng, truth[:200], 0.9) + annotations_for(rng, truth[200:], 0.6)
    return truth, source, annotations


def test_a_stratified_sample_estimated_by_strata_covers_where_the_same_codes_as_a_random_sample_do_not():
    rng = np.random.default_rng(8)
    truth, source, annotations = strata_population(rng)
    true_share = truth.count("acquisition") / len(truth)
    design = newrllama.CodingDesign.stratified(source)
    covered, naive_covered, noticed = 0, 0, 0
    draws = 300
    for _ in range(draws):
        # Wires oversampled: 60 of 200 against 30 of 600.
        coded = set(rng.choice(200, 60, replace=False).tolist()) | set((200 + rng.choice(600, 30, replace=False)).tolist())
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        s = newrllama.prevalence(annotations, codes, design=design).share("acquisition")
        covered += s.lower <= true_share <= s.upper
        with warnings.catch_warnings(record=True) as caught:  # as if a simple random sample
            warnings.simplefilter("always", newrllama.CodingSampleWarning)
            wrong = newrllama.prevalence(annotations, codes).share("acquisition")
        naive_covered += wrong.classical_lower <= true_share <= wrong.classical_upper
        noticed += any(w.category is newrllama.CodingSampleWarning for w in caught)
    assert covered >= 0.9 * draws
    assert naive_covered < 0.5 * draws  # the coded texts' own share, unweighted, is far off
    assert noticed > 0.5 * draws  # read bare, the oversampled stratum's labels mostly show (sample_check.py)


def test_strata_need_two_coded_texts_each_and_one_stratum_per_text():
    rng = np.random.default_rng(1)
    truth, source, annotations = strata_population(rng)
    codes = [t if i < 50 or i == 300 else None for i, t in enumerate(truth)]
    with pytest.raises(newrllama.InvalidArgumentError, match="1 coded text in stratum 'blog'"):
        newrllama.prevalence(annotations, codes, design=newrllama.CodingDesign.stratified(source))
    with pytest.raises(newrllama.InvalidArgumentError, match="strata must be 800 values"):
        newrllama.prevalence(annotations, codes, design=newrllama.CodingDesign.stratified(source[:-1]))
    with pytest.raises(newrllama.InvalidArgumentError, match="missing values"):
        newrllama.CodingDesign.stratified(["wire", None])
    with pytest.raises(newrllama.InvalidArgumentError, match="not both"):
        newrllama.prevalence(annotations, codes, design=newrllama.CodingDesign.random(), inclusion_probs=[0.5] * 800)


def test_picked_texts_are_refused_for_estimates_with_the_reason():
    rng = np.random.default_rng(3)
    truth = [str(t) for t in rng.choice(LABELS, size=100)]
    annotations = annotations_for(rng, truth)
    picked = newrllama.least_confident(annotations, 30)
    codes = [t if i in picked else None for i, t in enumerate(truth)]
    design = newrllama.CodingDesign.picked("as the least confident labels (least_confident())")
    with pytest.raises(newrllama.InvalidArgumentError, match="picked .*least confident.*calibrate"):
        newrllama.prevalence(annotations, codes, design=design)
    with pytest.raises(newrllama.InvalidArgumentError, match="picked"):
        newrllama.regression(np.ones((100, 1)), [1.0 if c == "earnings" else (None if c is None else 0.0)
                                                 for c in codes],
                             [a.probs["earnings"] for a in annotations], intercept=False, design=design)
    text = newrllama.methods_text(annotations, codes, design=design)
    assert "30 of the 100 texts were coded by hand, picked as the least confident" in text
    assert "calibration only" in text and "PPI++" not in text
    with pytest.raises(newrllama.InvalidArgumentError, match="says how the texts were picked"):
        newrllama.CodingDesign.picked("")


def test_a_stratified_plan_draws_within_strata_towards_their_shares():
    rng = np.random.default_rng(4)
    truth, source, annotations = strata_population(rng)
    first = set(range(0, 200, 10))  # 20 wires, no blog yet
    codes = [t if i in first else None for i, t in enumerate(truth)]
    plan = newrllama.plan_coding(annotations, codes, budget=60, strata=source, seed=7)
    assert plan.design == newrllama.CodingDesign.stratified(source)
    chosen = set(plan.texts)
    assert len(chosen) == 60 and not chosen & first
    n_wire = sum(source[i] == "wire" for i in chosen | first)
    assert n_wire == 20  # 80 coded in all: a quarter wires, as the texts are; all new texts are blogs
    assert plan.texts == newrllama.plan_coding(annotations, codes, budget=60, strata=source, seed=7).texts
    coded = [t if i in chosen | first else None for i, t in enumerate(truth)]
    share = newrllama.prevalence(annotations, coded, design=plan.design).share("earnings")
    assert share.n_coded == 80 and share.lower < truth.count("earnings") / 800 < share.upper
    text = newrllama.methods_text(annotations, coded, design=plan.design)
    assert "drawn at random within 2 strata (blog: 60 of 600; wire: 20 of 200)" in text
    with pytest.raises(newrllama.InvalidArgumentError, match="not both"):
        newrllama.plan_coding(annotations, codes, budget=10, strata=source, active=True)


def test_an_active_plan_carries_its_design():
    rng = np.random.default_rng(6)
    truth = [str(t) for t in rng.choice(LABELS, size=300)]
    annotations = annotations_for(rng, truth)
    codes = [t if i < 30 else None for i, t in enumerate(truth)]
    plan = newrllama.plan_coding(annotations, codes, budget=40, active=True, seed=1)
    assert plan.design.kind == "probabilities" and list(plan.design.inclusion_probs) == plan.inclusion_probs
