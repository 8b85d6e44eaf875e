"""Checking model labels against human coding, with how sure the figures are: validate()."""
from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from .agreement import missing
from ..columns import column_values
from ..errors import InvalidArgumentError
from ..frames import Tabular

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240229
RELIABILITY_BINS = 10
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class LabelScores:
    """One label's precision, recall and F1 against the human codes (`Validation.per_label`)."""
    precision: float
    recall: float
    f1: float
    support: int  # how often the label is the truth


@dataclass(frozen=True)
class ReliabilityBin:
    """Texts whose top probability fell in [low, high): their mean top probability and how often the label was right."""

    low: float
    high: float
    n: int
    confidence: float
    accuracy: float


@dataclass(frozen=True)
class Validation(Tabular):
    """Predicted labels against the truth.

    Pairs whose truth is missing are left out; a missing prediction (a prompt that
    failed, None or NaN) counts as wrong, in ``n_missing`` and in the confusion
    table under the key None. ``kappa`` is Cohen's kappa with a missing prediction
    as a category of its own. Precision, recall and F1 are 0 where undefined
    (no prediction of the label, or no true case), as in scikit-learn; ``macro_f1``
    is their mean over every label seen in the truth or the predictions.

    The 95% intervals: Wilson's score interval for ``accuracy``; percentile bootstrap
    intervals (BOOTSTRAP_RESAMPLES resamples of the pairs, a fixed seed, so the same
    data give the same interval) for ``kappa`` and ``macro_f1``. With ``probs``:
    ``brier`` (the mean over texts of the squared distance between the probabilities
    and the one-hot truth, summed over labels: 0 is perfect), ``ece`` (expected
    calibration error: the mean |accuracy - top probability| over RELIABILITY_BINS
    equal-width bins of the top probability, weighted by their texts) and
    ``reliability`` (the bins, for a reliability plot: ``plot()``)."""

    n: int
    n_missing: int
    accuracy: float
    kappa: float
    macro_f1: float
    labels: List[Hashable]
    per_label: Dict[Hashable, LabelScores]
    confusion: Dict[Hashable, Dict[Optional[Hashable], int]]  # truth -> predicted -> count
    accuracy_ci: Tuple[float, float] = (math.nan, math.nan)
    kappa_ci: Tuple[float, float] = (math.nan, math.nan)
    macro_f1_ci: Tuple[float, float] = (math.nan, math.nan)
    brier: Optional[float] = None
    ece: Optional[float] = None
    reliability: List[ReliabilityBin] = field(default_factory=list)
    order_flip_share: Optional[float] = None  # of the texts scored in several listing orders, coded or not

    def rows(self) -> List[Dict[str, Any]]:
        """One row per label: its precision, recall, F1 and support (the figures of the whole set are fields)."""
        return [{"label": label, **asdict(scores)} for label, scores in self.per_label.items()]

    def plot(self, ax=None):
        """A reliability diagram (matplotlib, the optional extra 'plot'): the accuracy of each bin against its
        mean top probability, on the diagonal where the probabilities are calibrated. Returns the axes."""
        if not self.reliability:
            raise InvalidArgumentError("a reliability plot needs the probabilities: validate(predicted, truth, probs=...)")
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise InvalidArgumentError("Validation.plot() needs matplotlib (pip install matplotlib)") from None
        if ax is None:
            _, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey")
        ax.plot([b.confidence for b in self.reliability], [b.accuracy for b in self.reliability], marker="o")
        ax.set_xlabel("top probability")
        ax.set_ylabel("share correct")
        ax.set_title(f"reliability (ECE {self.ece:.3f}, n = {self.n})")
        return ax


def _agreement(pairs: Sequence[Tuple[Any, Any]]) -> Tuple[float, float, float]:
    """Accuracy, Cohen's kappa and macro-F1 of (predicted, truth) pairs."""
    n = len(pairs)
    truth_counts = Counter(t for _, t in pairs)
    pred_counts = Counter(p for p, _ in pairs)
    hits = Counter(t for p, t in pairs if p == t)
    p_observed = sum(hits.values()) / n
    p_expected = sum(truth_counts[c] * pred_counts.get(c, 0) for c in truth_counts) / (n * n)
    kappa = 1.0 if p_expected == 1 else (p_observed - p_expected) / (1 - p_expected)
    labels = set(truth_counts) | {p for p in pred_counts if p is not None}
    f1s = []
    for c in labels:
        tp = hits.get(c, 0)
        f1s.append(2 * tp / (pred_counts.get(c, 0) + truth_counts.get(c, 0)) if tp else 0.0)
    return p_observed, kappa, sum(f1s) / len(f1s)


def wilson(successes: int, n: int) -> Tuple[float, float]:
    """Wilson's 95% score interval for a proportion."""
    p = successes / n
    centre = (p + _Z95 ** 2 / (2 * n)) / (1 + _Z95 ** 2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + _Z95 ** 2 / (4 * n * n)) / (1 + _Z95 ** 2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _bootstrap(pairs: Sequence[Tuple[Any, Any]]) -> Tuple[Tuple[float, float], Tuple[float, float]]:
    rng = random.Random(BOOTSTRAP_SEED)
    n = len(pairs)
    kappas, f1s = [], []
    for _ in range(BOOTSTRAP_RESAMPLES):
        _, kappa, f1 = _agreement([pairs[rng.randrange(n)] for _ in range(n)])
        kappas.append(kappa)
        f1s.append(f1)
    return percentile_interval(kappas), percentile_interval(f1s)


def percentile_interval(values: List[float]) -> Tuple[float, float]:
    """The 95% percentile interval of bootstrap draws."""
    values = sorted(values)
    return values[int(0.025 * (len(values) - 1))], values[int(math.ceil(0.975 * (len(values) - 1)))]


def _check_probs(probs: object, n: int) -> List[Optional[Mapping[Any, float]]]:
    if isinstance(probs, (str, bytes)) or not isinstance(probs, Sequence):
        raise InvalidArgumentError("probs must be a list with one dict label -> probability per text (None if missing)")
    out = list(probs)
    if len(out) != n:
        raise InvalidArgumentError(f"probs has {len(out)} entries but there are {n} labels")
    for i, p in enumerate(out):
        if p is None:
            continue
        if not isinstance(p, Mapping) or not p:
            raise InvalidArgumentError(f"probs[{i}] must be a dict label -> probability, got {p!r}")
        for label, value in p.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise InvalidArgumentError(f"probs[{i}][{label!r}] must be a probability in [0, 1], got {value!r}")
    return out


def _calibration(rows: Sequence[Tuple[Mapping[Any, float], Any]]) -> Tuple[float, float, List[ReliabilityBin]]:
    brier = sum(sum((q - (label == t)) ** 2 for label, q in p.items()) + (0 if t in p else 1) for p, t in rows) / len(rows)
    bins: List[List[Tuple[float, bool]]] = [[] for _ in range(RELIABILITY_BINS)]
    for p, t in rows:
        top = max(p, key=p.get)
        bins[min(int(p[top] * RELIABILITY_BINS), RELIABILITY_BINS - 1)].append((p[top], top == t))
    reliability = [ReliabilityBin(k / RELIABILITY_BINS, (k + 1) / RELIABILITY_BINS, len(b),
                                  sum(c for c, _ in b) / len(b), sum(ok for _, ok in b) / len(b))
                   for k, b in enumerate(bins) if b]
    ece = sum(b.n * abs(b.accuracy - b.confidence) for b in reliability) / len(rows)
    return brier, ece, reliability


def validate(predicted: Sequence[Any], truth: Sequence[Any], probs: Optional[Sequence[Any]] = None,
             order_flip: Optional[Sequence[Optional[bool]]] = None) -> Validation:
    """Predicted labels against the truth (see Validation); ``probs``: each text's label -> probability dict
    (``Annotation.probs``), None where the prediction is missing; ``order_flip``: each text's
    ``Annotation.order_flip``, whose share of True among the texts scored in several orders is reported."""
    predicted, truth = column_values(predicted, "predicted", "labels"), column_values(truth, "truth", "labels")
    if len(predicted) != len(truth):
        raise InvalidArgumentError(f"predicted has {len(predicted)} labels but truth has {len(truth)}")
    checked_probs = _check_probs(probs, len(truth)) if probs is not None else None
    flip_share = _flip_share(order_flip, len(truth)) if order_flip is not None else None
    pairs = [(None if missing(p) else p, t) for p, t in zip(predicted, truth) if not missing(t)]
    if not pairs:
        raise InvalidArgumentError("no pair with a known truth to validate")
    n = len(pairs)
    labels = sorted({t for _, t in pairs} | {p for p, _ in pairs if p is not None}, key=repr)
    confusion: Dict[Hashable, Dict[Optional[Hashable], int]] = {t: {} for t in labels}
    for p, t in pairs:
        confusion[t][p] = confusion[t].get(p, 0) + 1
    truth_counts = Counter(t for _, t in pairs)
    pred_counts = Counter(p for p, _ in pairs)
    accuracy, kappa, macro_f1 = _agreement(pairs)
    per_label = {}
    for c in labels:
        tp = confusion[c].get(c, 0)
        precision = tp / pred_counts[c] if pred_counts.get(c) else 0.0
        recall = tp / truth_counts[c] if truth_counts.get(c) else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        per_label[c] = LabelScores(precision, recall, f1, truth_counts.get(c, 0))
    kappa_ci, f1_ci = _bootstrap(pairs)
    brier = ece = None
    reliability: List[ReliabilityBin] = []
    if checked_probs is not None:
        rows = [(p, t) for p, t in zip(checked_probs, truth) if p is not None and not missing(t)]
        if rows:
            brier, ece, reliability = _calibration(rows)
    return Validation(n=n, n_missing=pred_counts.get(None, 0), accuracy=accuracy, kappa=kappa, macro_f1=macro_f1,
                      labels=labels, per_label=per_label, confusion=confusion,
                      accuracy_ci=wilson(round(accuracy * n), n), kappa_ci=kappa_ci, macro_f1_ci=f1_ci,
                      brier=brier, ece=ece, reliability=reliability, order_flip_share=flip_share)


def _flip_share(order_flip: Sequence[Optional[bool]], n: int) -> Optional[float]:
    if isinstance(order_flip, (str, bytes)) or not isinstance(order_flip, Sequence) or len(order_flip) != n:
        raise InvalidArgumentError(f"order_flip must be a list of {n} True, False or None (Annotation.order_flip)")
    known = [f for f in order_flip if not missing(f)]
    if any(not isinstance(f, bool) for f in known):
        raise InvalidArgumentError("order_flip must hold True, False or None (Annotation.order_flip)")
    return sum(known) / len(known) if known else None
