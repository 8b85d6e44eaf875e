"""Coded texts chosen by the model's doubt are noticed: carried as picked from least_confident() through the coding
sheet to the estimates, and, given as a bare truth vector, caught by the check that compares them with the
uncoded texts, at its stated false-alarm rate."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import newrllama
from newrllama.findings.coded import coded_texts
from newrllama.findings.sample_check import FALSE_ALARM, check_sample

LABELS = ["arts", "business", "health", "politics", "science", "sport"]
N_TEXTS, N_CODED, DRAWS = 240, 30, 200


def corpus(seed: int):
    """Annotations of N_TEXTS texts whose probabilities vary as a model's do: mostly sure, some in doubt."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_TEXTS):
        p = rng.dirichlet(np.full(len(LABELS), rng.choice([0.3, 1.0, 3.0])))
        out.append(newrllama.Annotation(LABELS[int(p.argmax())], dict(zip(LABELS, p.tolist()))))
    return out


def codes_at(annotations, positions):
    """Human codes for the texts at positions (the model's label, or the next one for every third text)."""
    truth = [None] * len(annotations)
    for k, i in enumerate(positions):
        label = annotations[i].label
        truth[i] = label if k % 3 else LABELS[(LABELS.index(label) + 1) % len(LABELS)]
    return truth


def verdict(annotations, positions) -> bool:
    kept = np.ones(len(annotations), dtype=bool)
    coded = np.zeros(len(annotations), dtype=bool)
    coded[list(positions)] = True
    margins = np.array([a.margin for a in annotations])
    predicted = np.array([LABELS.index(a.label) for a in annotations])
    return check_sample(margins[kept], predicted, coded, len(LABELS)).unlike_random


def test_least_confident_codes_are_flagged_and_random_samples_are_not_in_simulation():
    picked = random = 0
    for seed in range(DRAWS):
        annotations = corpus(seed)
        picked += verdict(annotations, newrllama.least_confident(annotations, N_CODED))
        rng = np.random.default_rng(10_000 + seed)
        random += verdict(annotations, rng.choice(N_TEXTS, N_CODED, replace=False))
    assert picked >= 0.99 * DRAWS
    assert random <= 0.01 * DRAWS  # FALSE_ALARM is 1 in 1,000: 0.2 expected in 200
    assert FALSE_ALARM == 0.001


def test_the_least_confident_five_are_already_flagged():
    annotations = corpus(7)
    assert verdict(annotations, newrllama.least_confident(annotations, 5))


def test_prevalence_warns_on_least_confident_codes_given_bare_and_methods_text_claims_no_random_sample():
    annotations = corpus(1)
    truth = codes_at(annotations, list(newrllama.least_confident(annotations, N_CODED)))
    with pytest.warns(newrllama.CodingSampleWarning, match="do not look like a random sample.*less sure"):
        newrllama.prevalence(annotations, truth)
    with pytest.warns(newrllama.CodingSampleWarning):
        text = newrllama.methods_text(annotations, truth)
    assert "random sample" not in text.replace("not a random sample", "")
    assert "not a random sample" in text and "No share was estimated" in text


def test_a_random_sample_given_bare_is_estimated_without_a_warning():
    annotations = corpus(2)
    positions = np.random.default_rng(3).choice(N_TEXTS, N_CODED, replace=False).tolist()
    truth = codes_at(annotations, positions)
    with warnings.catch_warnings():
        warnings.simplefilter("error", newrllama.CodingSampleWarning)
        newrllama.prevalence(annotations, truth)
        assert "A simple random sample of 30 of the 240 texts" in newrllama.methods_text(annotations, truth)


def test_a_design_given_is_not_second_guessed():
    annotations = corpus(1)
    truth = codes_at(annotations, list(newrllama.least_confident(annotations, N_CODED)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", newrllama.CodingSampleWarning)
        newrllama.prevalence(annotations, truth, design=newrllama.CodingDesign.random())


def test_least_confident_positions_go_through_the_sheet_as_picked_and_estimates_refuse_them(tmp_path):
    annotations = corpus(4)
    texts = [f"text {i}" for i in range(N_TEXTS)]
    positions = newrllama.least_confident(annotations, 12)
    sheet = newrllama.write_coding_sheet(texts, positions, tmp_path / "sheet.csv")
    filled = sheet.read_text().splitlines()
    filled = [filled[0]] + [line + annotations[int(line.split(",")[0])].label for line in filled[1:]]
    sheet.write_text("\n".join(filled) + "\n")
    codes = newrllama.read_coding_sheet(sheet, list(range(N_TEXTS)), LABELS)
    assert codes.design.kind == "picked" and "least_confident()" in codes.design.how
    assert sum(c is not None for c in codes) == 12
    with pytest.raises(newrllama.InvalidArgumentError, match="picked .*least_confident.*not drawn at random"):
        newrllama.prevalence(annotations, codes)
    assert "used for calibration only" in newrllama.methods_text(annotations, codes)


def test_a_sheet_without_a_design_beside_it_carries_none(tmp_path):
    sheet = newrllama.write_coding_sheet(["a", "b"], [1], tmp_path / "sheet.csv")
    assert newrllama.read_coding_sheet(sheet, [0, 1], LABELS).design is None


def test_calibrated_probabilities_are_checked_by_the_model_s_own():
    """cross_fit() gives each coded text its own fold's fit and the others every fold's: probabilities that differ
    between coded and uncoded texts by construction, which must not read as a sample unlike random."""
    annotations = corpus(4)
    positions = np.random.default_rng(5).choice(N_TEXTS, N_CODED, replace=False).tolist()
    truth = codes_at(annotations, positions)
    fitted = newrllama.cross_fit(annotations, truth, penalty=1.0)
    assert [a.probs for a in fitted] != [a.probs for a in annotations]
    checks = [coded_texts(a, truth, "probs") for a in (annotations, fitted)]
    as_model, as_fitted = (check_sample(c.model_margins, c.model_predicted, c.coded, len(LABELS)) for c in checks)
    assert as_fitted == as_model and not as_fitted.unlike_random
    picked = codes_at(annotations, list(newrllama.least_confident(annotations, N_CODED)))
    with pytest.warns(newrllama.CodingSampleWarning, match="less sure"):
        newrllama.prevalence(newrllama.cross_fit(annotations, picked, penalty=1.0), picked)
