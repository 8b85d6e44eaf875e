"""methods_text() for a whole study: the model's agreement with the coders, each group's shares and differences,
and the regression, each figure saying what it is of; the figures are those the estimators give."""
from __future__ import annotations

import numpy as np
import pytest

import newrllama

LABELS = ["immigration", "other"]
N = 240


def study():
    rng = np.random.default_rng(11)
    party = [str(p) for p in rng.choice(["left", "right"], size=N)]
    truth = [("immigration" if rng.random() < (0.2 if p == "left" else 0.45) else "other") for p in party]
    annotations = []
    for t in truth:
        label = t if rng.random() < 0.85 else [x for x in LABELS if x != t][0]
        p = float(np.clip(0.75 + rng.normal(0, 0.1), 0.5, 0.99))
        annotations.append(newrllama.Annotation(label, {x: p if x == label else 1 - p for x in LABELS}))
    codes = [t if i % 4 == 0 else None for i, t in enumerate(truth)]
    return annotations, codes, party


def test_the_paragraph_reports_agreement_groups_and_the_regression_with_their_estimands():
    annotations, codes, party = study()
    shares = newrllama.prevalence(annotations, codes, by=party)
    coded = [None if c is None else float(c == "immigration") for c in codes]
    fit = newrllama.regression([[float(p == "right")] for p in party], coded,
                               [a.probs["immigration"] for a in annotations], names=["right"])
    text = newrllama.methods_text(annotations, codes, by=party, regression=fit)
    check = newrllama.validate([a.label for a in annotations], codes)
    assert (f"On the {N // 4} coded texts the model's labels matched the human codes for {100 * check.accuracy:.1f}% "
            f"(Cohen's kappa {check.kappa:.2f}") in text
    left = shares.share("immigration", "left")
    assert f"left: immigration {left.estimate:.3f} [{left.lower:.3f}, {left.upper:.3f}]" in text
    difference = next(d for d in shares.differences if d.label == "immigration")
    assert (f"Differences from group left (95% intervals): right, immigration {difference.estimate:+.3f} "
            f"[{difference.lower:+.3f}, {difference.upper:+.3f}]") in text
    slope = fit.coefficient("right")
    assert f"right {slope.estimate:.3f} [{slope.lower:.3f}, {slope.upper:.3f}]" in text
    assert "the share among these texts, with a finite-population correction" in text
    assert "Unlike the shares, which are of these texts, the coefficients are of the process" in text
    process = newrllama.methods_text(annotations, codes, regression=fit,
                                     design=newrllama.CodingDesign.random(finite=False))
    assert "The coefficients are of the process the texts come from" in process and "Unlike" not in process


def test_a_regression_without_codes_is_still_reported_and_bad_arguments_are_clear():
    annotations, codes, party = study()
    coded = [None if c is None else float(c == "immigration") for c in codes]
    fit = newrllama.regression([[float(p == "right")] for p in party], coded,
                               [a.probs["immigration"] for a in annotations], names=["right"])
    assert "A least-squares regression was estimated by PPI++" in newrllama.methods_text(annotations, regression=fit)
    with pytest.raises(newrllama.InvalidArgumentError, match="regression must be regression"):
        newrllama.methods_text(annotations, codes, regression="fit")
    with pytest.raises(newrllama.InvalidArgumentError, match="by= groups the shares, which need truth"):
        newrllama.methods_text(annotations, by=party)
