"""Ordinal codes (a 1-5 tone, none / some / most): each text's expected score from the model's probabilities, the
mean score with a valid interval (mean_score()), and agreement that counts near misses (weighted_kappa()).

A code may also be "unclear" (or "none of these"): a label off the scale that coders, and the model when offered
it, may give. It enters the estimates as follows, and methods paragraphs should say so: its share is a share like
any label's (prevalence()); the mean score is the mean over the texts on the scale, that is the ratio of the
scores' total to the number of texts not unclear, both estimated from the model's probabilities and the coded
texts. The ratio's interval is PPI++'s for its linearisation (the delta method): with z = c (s - mu) / P(clear)
(s the code's score, c = 1 for a text on the scale), mean_score() estimates the mean of z at a first estimate of
mu and moves mu by it, twice."""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..columns import column_values
from ..errors import InvalidArgumentError
from ..frames import Tabular
from ..labels.agreement import missing
from ..labels.validation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, percentile_interval
from .coded import coded_texts, warn_if_failed
from .design import CodingDesign
from .ppi import check_alpha, ppi_mean, z_interval


@dataclass(frozen=True)
class MeanScore(Tabular):
    """The mean score over the texts on the scale: PPI++ with its interval (``lam``: the weight given to the model),
    the model's expected scores alone (naive: its errors ignored), and the coded texts alone."""

    estimate: float
    se: float
    lower: float
    upper: float
    lam: float
    naive: float
    naive_lower: float
    naive_upper: float
    classical: float
    classical_se: float
    classical_lower: float
    classical_upper: float
    n_coded: int
    n_unclear: int  # coded texts whose code is off the scale
    n_texts: int

    def rows(self) -> List[Dict[str, Any]]:
        return [asdict(self)]


def _check_scale(scores: Mapping[Hashable, float], unclear: Sequence[Hashable]) -> Tuple[Dict[Hashable, float],
                                                                                        List[Hashable]]:
    if not isinstance(scores, Mapping) or not scores:
        raise InvalidArgumentError("scores must be a dict label -> number for the labels on the scale, e.g. "
                                   "{'negative': -1, 'neutral': 0, 'positive': 1}")
    checked = {}
    for label, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidArgumentError(f"the score of {label!r} must be a finite number, got {value!r}")
        checked[label] = float(value)
    off = list(unclear if not isinstance(unclear, str) else [unclear])
    both = [u for u in off if u in checked]
    if both:
        raise InvalidArgumentError(f"{both} are given a score and called unclear: a label is on the scale or off it")
    return checked, off


def expected_scores(annotations: Sequence[Any], scores: Mapping[Hashable, float],
                    unclear: Sequence[Hashable] = ()) -> List[Optional[float]]:
    """Each text's expected score: its probabilities over the labels on the scale, renormalised without the unclear
    labels, times their scores (None for a failed text)."""
    scale, _ = _check_scale(scores, unclear)
    out: List[Optional[float]] = []
    for a in annotations:
        if a.label is None or not a.probs:
            out.append(None)
            continue
        on = {label: p for label, p in a.probs.items() if label in scale}
        total = sum(on.values())
        out.append(sum(p * scale[label] for label, p in on.items()) / total if total > 0 else None)
    return out


def mean_score(annotations: Sequence[Any], truth: Sequence[Any], scores: Mapping[Hashable, float], *,
               unclear: Sequence[Hashable] = (), alpha: float = 0.05,
               design: Optional[CodingDesign] = None) -> MeanScore:
    """The mean score of an ordinal code over the texts on its scale, with an interval valid whatever the model's
    errors (PPI++, the coded texts a simple random sample of the texts; ``design`` as prevalence() takes it, among
    its kinds "random" only). ``scores``: label -> number for the labels on the scale; ``unclear``: the labels off
    it (their texts are left out of the mean: see the module's doc for how); every other label is refused."""
    alpha = check_alpha(alpha)
    scale, off = _check_scale(scores, unclear)
    design = CodingDesign.random() if design is None else design
    if not isinstance(design, CodingDesign):
        raise InvalidArgumentError(f"design must be a newrllama.CodingDesign, got {type(design).__name__}")
    design.check_estimable("mean_score()")
    if design.kind != "random":
        raise InvalidArgumentError(f"mean_score() takes a simple random sample of coded texts; for a {design.kind} "
                                   "design estimate each label's share with prevalence(), which weights it")
    data = coded_texts(annotations, truth, "probs")
    strangers = [label for label in data.labels if label not in scale and label not in off]
    if strangers:
        raise InvalidArgumentError(f"the labels {strangers} have no score and are not unclear: give each label a "
                                   "score, or name it in unclear")
    warn_if_failed(data, "mean_score()")
    values = np.array([scale.get(label, 0.0) for label in data.labels])
    on_scale = np.array([label in scale for label in data.labels], dtype=float)
    p_clear = data.predictions @ on_scale                       # the model's probability that a text is on the scale
    f_total = data.predictions @ (values * on_scale)            # and its expected score times that
    coded = data.coded
    c = np.where(coded, on_scale[np.maximum(data.truth, 0)], 0.0)
    s = np.where(coded, values[np.maximum(data.truth, 0)], 0.0)
    if c[coded].sum() < 2:
        raise InvalidArgumentError(f"{int(c[coded].sum())} coded texts are on the scale: a mean score needs at least 2")
    finite = design.finite

    def linearised(mu: float, lam: Optional[float]):
        share_clear = float(c[coded].mean())
        z = c * (s - mu) / share_clear
        g = (f_total - mu * p_clear) / share_clear
        return ppi_mean(z[coded], g[coded], g[~coded], alpha, lam=lam, finite=finite)

    classical_mu = float(s[coded & (c == 1)].mean())
    mu, lam = classical_mu, None
    for _ in range(2):
        step, lam = linearised(mu, None)
        mu += step.estimate
    final, lam = linearised(mu, lam)
    alone, _ = linearised(classical_mu, 0.0)
    estimate = z_interval(mu + final.estimate, final.se, alpha)
    classical = z_interval(classical_mu + alone.estimate, alone.se, alpha)
    # The model's expected scores alone, their ratio's interval as if the model never erred: not to be reported.
    naive_mu = float(f_total.sum() / p_clear.sum())
    naive = z_interval(naive_mu, float(np.sqrt(np.sum((f_total - naive_mu * p_clear) ** 2))) / float(p_clear.sum()),
                       alpha)
    return MeanScore(estimate.estimate, estimate.se, estimate.lower, estimate.upper, float(lam), naive.estimate,
                     naive.lower, naive.upper, classical.estimate, classical.se, classical.lower, classical.upper,
                     int(coded.sum()), int((coded & (c == 0)).sum()), data.n)


def weighted_kappa(predicted: Sequence[Any], truth: Sequence[Any], scale: Sequence[Hashable],
                   weights: str = "quadratic") -> Tuple[float, Tuple[float, float]]:
    """Cohen's kappa weighted by how far apart two codes stand on ``scale`` (the labels in order): "linear" or
    "quadratic" disagreement weights. Pairs with a missing or off-scale code are left out. Returns kappa and its
    95% bootstrap interval (1,000 resamples, a fixed seed)."""
    if weights not in ("linear", "quadratic"):
        raise InvalidArgumentError(f"weights must be 'linear' or 'quadratic', got {weights!r}")
    order = list(scale)
    if len(order) < 2 or len(set(order)) != len(order):
        raise InvalidArgumentError("scale must list at least two distinct labels, in order")
    predicted = column_values(predicted, "predicted", "labels")
    truth = column_values(truth, "truth", "labels")
    if len(predicted) != len(truth):
        raise InvalidArgumentError(f"predicted has {len(predicted)} labels but truth has {len(truth)}")
    pairs = [(order.index(p), order.index(t)) for p, t in zip(predicted, truth)
             if not missing(p) and not missing(t) and p in order and t in order]
    if len(pairs) < 2:
        raise InvalidArgumentError("fewer than 2 pairs with both codes on the scale")
    k = len(order)
    power = 1 if weights == "linear" else 2
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))) ** power / (k - 1) ** power

    def kappa(sample: List[Tuple[int, int]]) -> float:
        table = np.zeros((k, k))
        for p, t in sample:
            table[p, t] += 1
        table /= table.sum()
        expected = np.outer(table.sum(1), table.sum(0))
        chance = float((distance * expected).sum())
        return 1.0 - float((distance * table).sum()) / chance if chance > 0 else 1.0

    rng = random.Random(BOOTSTRAP_SEED)
    draws = [kappa([pairs[rng.randrange(len(pairs))] for _ in pairs]) for _ in range(BOOTSTRAP_RESAMPLES)]
    return kappa(pairs), percentile_interval(draws)
