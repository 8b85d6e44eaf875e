"""regression() under a stratified sample and under texts drawn with known probabilities: the coefficients of the
process the texts come from, covered at about the nominal rate in simulation, where the same codes read as a simple
random sample are not (the breaking change these tests name: dropping the design's weights)."""
from __future__ import annotations

import numpy as np
import pytest

import newrllama
from newrllama.findings.ppi import classical_glm

DRAWS = 200


def _least_squares(x, y):
    return np.linalg.lstsq(x, y, rcond=None)[0]


def stratified_process(rng, n):
    """Two sources: 1 in 4 texts from a source whose outcome runs higher at the same x (left out of the model, so
    the pooled slope depends on the sources' mix); the model's prediction misses that source's steeper slope."""
    source = rng.random(n) < 0.25
    x = rng.normal(size=n) + 0.8 * source
    y = 1.0 + 0.5 * x + 1.5 * source * x + rng.normal(size=n)
    f = y - 1.2 * source * x + rng.normal(scale=0.5, size=n)
    return source, np.column_stack([np.ones(n), x]), y, f


def test_a_stratified_sample_covers_the_process_slope_and_a_random_reading_of_it_does_not():
    rng = np.random.default_rng(11)
    _, big_x, big_y, _ = stratified_process(rng, 2_000_000)
    slope = _least_squares(big_x, big_y)[1]
    covered = naive_covered = 0
    ppi_widths, classical_widths = [], []
    for _ in range(DRAWS):
        source, x, y, f = stratified_process(rng, 1200)
        coded = np.zeros(len(y), dtype=bool)
        for cell, n_h in ((source, 60), (~source, 30)):  # the small source oversampled 5 to 1
            coded[rng.choice(np.flatnonzero(cell), n_h, replace=False)] = True
        truth = np.where(coded, y, np.nan)
        design = newrllama.CodingDesign.stratified(np.where(source, "small", "large"))
        fit = newrllama.regression(x, truth, f, intercept=False, design=design).coefficients[1]
        covered += fit.lower <= slope <= fit.upper
        ppi_widths.append(fit.upper - fit.lower)
        classical_widths.append(fit.classical_upper - fit.classical_lower)
        as_random = newrllama.regression(x, truth, f, intercept=False).coefficients[1]
        naive_covered += as_random.lower <= slope <= as_random.upper
    assert covered >= 0.9 * DRAWS, covered
    assert naive_covered < 0.7 * DRAWS, naive_covered  # the simulation can tell a design ignored
    assert np.median(ppi_widths) < 0.9 * np.median(classical_widths)  # the predictions still narrow it


def probability_process(rng, n):
    """A logistic outcome with a curve the model (linear in x) leaves out; texts with x > 0.5 coded five times as
    often."""
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(-0.5 + x + 0.8 * x * x)))).astype(float)
    f = np.clip(0.75 * y + 0.25 * rng.random(n), 0, 1)
    pi = np.where(x > 0.5, 0.25, 0.05)
    return np.column_stack([np.ones(n), x]), y, f, pi


def test_texts_drawn_with_known_probabilities_cover_the_logistic_slope_and_an_unweighted_reading_does_not():
    rng = np.random.default_rng(12)
    big_x, big_y, _, _ = probability_process(rng, 400_000)
    slope = classical_glm("binomial", big_x, big_y, 0.05)[1].estimate
    covered = naive_covered = 0
    for _ in range(DRAWS):
        x, y, f, pi = probability_process(rng, 1500)
        coded = rng.random(len(y)) < pi
        truth = np.where(coded, y, np.nan)
        design = newrllama.CodingDesign.probabilities(pi)
        fit = newrllama.regression(x, truth, f, intercept=False, family="binomial", design=design).coefficients[1]
        covered += fit.lower <= slope <= fit.upper
        as_random = newrllama.regression(x, truth, f, intercept=False, family="binomial").coefficients[1]
        naive_covered += as_random.lower <= slope <= as_random.upper
    assert covered >= 0.9 * DRAWS, covered
    assert naive_covered < 0.7 * DRAWS, naive_covered


def test_equal_rates_in_every_stratum_give_the_unweighted_coded_fit_and_strata_need_two_coded_texts():
    rng = np.random.default_rng(4)
    source, x, y, f = stratified_process(rng, 400)
    coded = np.zeros(len(y), dtype=bool)
    for cell in (source, ~source):
        idx = np.flatnonzero(cell)
        coded[rng.choice(idx, len(idx) // 4, replace=False)] = True
    truth = np.where(coded, y, np.nan)
    strata = np.where(source, "small", "large")
    fit = newrllama.regression(x, truth, f, intercept=False, design=newrllama.CodingDesign.stratified(strata))
    unweighted = _least_squares(x[coded], y[coded])
    assert [c.classical for c in fit.coefficients] == pytest.approx(unweighted.tolist(), rel=1e-9)
    assert 0 <= fit.lam <= 1
    one = coded & source
    truth[np.flatnonzero(one)[1:]] = np.nan
    with pytest.raises(newrllama.InvalidArgumentError, match="1 coded text in stratum 'small'.*at least 2"):
        newrllama.regression(x, truth, f, intercept=False, design=newrllama.CodingDesign.stratified(strata))
