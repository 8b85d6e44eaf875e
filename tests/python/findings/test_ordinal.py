"""Ordinal codes: expected scores, the mean score over the texts on the scale with an "unclear" code left out (its
coverage in simulation, and its equality with PPI++'s mean when nothing is unclear), and weighted kappa against
scikit-learn's."""
from __future__ import annotations

import numpy as np
import pytest

import newrllama
from newrllama.findings.ordinal import expected_scores, mean_score, weighted_kappa
from newrllama.findings.ppi import ppi_mean

SCALE = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 4.0, "5": 5.0}
LABELS = list(SCALE) + ["unclear"]


def population(rng, n, unclear_share=0.15):
    """Tones 1-5 and some unclear texts; the model's probabilities lean to the true code, with errors."""
    truth = [str(t) for t in rng.choice([1, 2, 3, 4, 5], size=n, p=[0.1, 0.2, 0.3, 0.25, 0.15])]
    truth = ["unclear" if rng.random() < unclear_share else t for t in truth]
    out = []
    for t in truth:
        weights = rng.dirichlet(np.ones(len(LABELS))) + 2.0 * (np.array(LABELS) == t)
        p = weights / weights.sum()
        out.append(newrllama.Annotation(LABELS[int(np.argmax(p))], dict(zip(LABELS, p.tolist()))))
    return truth, out


def test_the_mean_over_the_texts_on_the_scale_is_covered_and_unclear_texts_are_left_out():
    rng = np.random.default_rng(21)
    truth, annotations = population(rng, 500)
    on_scale = [SCALE[t] for t in truth if t != "unclear"]
    target = float(np.mean(on_scale))
    covered = as_zero = 0
    widths, classical_widths = [], []
    draws = 300
    for _ in range(draws):
        coded = set(rng.choice(len(truth), 80, replace=False).tolist())
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        m = mean_score(annotations, codes, SCALE, unclear=["unclear"])
        covered += m.lower <= target <= m.upper
        widths.append(m.upper - m.lower)
        classical_widths.append(m.classical_upper - m.classical_lower)
        # the breaking change: scoring unclear texts as 0 instead of leaving them out
        zero = mean_score(annotations, codes, {**SCALE, "unclear": 0.0})
        as_zero += zero.lower <= target <= zero.upper
    assert covered >= 0.9 * draws, covered
    assert as_zero < 0.5 * draws, as_zero
    assert np.median(widths) < np.median(classical_widths)
    assert m.n_coded == 80 and m.n_unclear == sum(codes[i] == "unclear" for i in coded) and m.n_texts == 500


def test_with_nothing_unclear_it_is_ppi_plus_plus_mean_of_the_scores():
    rng = np.random.default_rng(3)
    truth, annotations = population(rng, 300, unclear_share=0.0)
    scale_only = [newrllama.Annotation(a.label if a.label != "unclear" else "3",
                                       {k: v / (1 - a.probs["unclear"]) for k, v in a.probs.items() if k != "unclear"})
                  for a in annotations]
    coded = set(rng.choice(300, 60, replace=False).tolist())
    codes = [t if i in coded else None for i, t in enumerate(truth)]
    m = mean_score(scale_only, codes, SCALE)
    f = np.array(expected_scores(scale_only, SCALE))
    y = np.array([SCALE[t] for t in truth])
    mask = np.array([i in coded for i in range(300)])
    reference, lam = ppi_mean(y[mask], f[mask], f[~mask], 0.05, finite=True)
    assert m.estimate == pytest.approx(reference.estimate, abs=1e-12)
    assert m.se == pytest.approx(reference.se, rel=1e-9) and m.lam == pytest.approx(lam)
    assert m.classical == pytest.approx(y[mask].mean())


def test_expected_scores_and_refusals():
    a = newrllama.Annotation("2", {"1": 0.2, "2": 0.5, "3": 0.1, "unclear": 0.2})
    assert expected_scores([a, newrllama.Annotation(None, error="failed")], {"1": 1, "2": 2, "3": 3},
                           unclear=["unclear"]) == [pytest.approx((0.2 + 1.0 + 0.3) / 0.8), None]
    with pytest.raises(newrllama.InvalidArgumentError, match=r"\['unclear'\] have no score and are not unclear"):
        mean_score([a] * 4, ["1", "2", None, None], {"1": 1, "2": 2, "3": 3})
    with pytest.raises(newrllama.InvalidArgumentError, match="on the scale or off it"):
        mean_score([a] * 4, ["1", "2", None, None], {"1": 1, "2": 2, "3": 3, "unclear": 0}, unclear="unclear")
    with pytest.raises(newrllama.InvalidArgumentError, match="must be a finite number"):
        expected_scores([a], {"1": "low"})
    with pytest.raises(newrllama.InvalidArgumentError, match="picked"):
        mean_score([a] * 4, ["1", "2", None, None], {"1": 1, "2": 2, "3": 3}, unclear=["unclear"],
                   design=newrllama.CodingDesign.picked("by hand"))


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_weighted_kappa_is_scikit_learns(weights):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(7)
    truth = [str(t) for t in rng.integers(1, 6, size=120)]
    predicted = [str(min(5, max(1, int(t) + int(rng.integers(-1, 2))))) for t in truth]
    kappa, (low, high) = weighted_kappa(predicted, truth, ["1", "2", "3", "4", "5"], weights)
    assert kappa == pytest.approx(metrics.cohen_kappa_score(predicted, truth, weights=weights), abs=1e-12)
    assert low < kappa < high
    with pytest.raises(newrllama.InvalidArgumentError, match="weights must be"):
        weighted_kappa(predicted, truth, ["1", "2"], "cubic")


OIL_SCALE = {"not about oil": 0.0, "partly about oil": 1.0, "mainly about oil": 2.0}


def test_an_unclear_code_end_to_end_from_annotate_to_the_mean_and_the_shares(model):
    """Reuters stories labelled on a three-point scale with "unclear" offered to the model; coders gave the scale's
    ends from the stories' topics, and "unclear" to two stories."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from reuters import reuters_stories
    stories = reuters_stories()
    picked = stories[:6] + stories[-6:]
    texts = [t[:200] for t, _ in picked]
    codes = ["not about oil" if label == "acquisition" else "mainly about oil" for _, label in picked]
    codes[4] = codes[10] = "unclear"
    truth = [c if i % 3 != 0 else None for i, c in enumerate(codes)]  # 8 coded, two of them unclear
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        labelled = newrllama.annotate(texts, list(OIL_SCALE) + ["unclear"], "How much is this news story about oil?",
                                      context=ctx)
    m = mean_score(labelled, truth, OIL_SCALE, unclear=["unclear"])
    on_scale = [OIL_SCALE[c] for c in truth if c not in (None, "unclear")]
    assert m.n_unclear == 2 and m.n_coded == 8 and m.classical == pytest.approx(np.mean(on_scale))
    assert 0.0 <= m.estimate <= 2.0 and m.lower < m.estimate < m.upper
    shares = newrllama.prevalence(labelled, truth)
    assert shares.share("unclear").classical == pytest.approx(2 / 8)
    kappa, _ = weighted_kappa([a.label for a in labelled], truth, list(OIL_SCALE))
    assert -1.0 <= kappa <= 1.0
