"""How common each label is, overall and by group, with valid intervals: prevalence()."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgumentError
from .coded import CodedTexts, coded_texts
from .ppi import Interval, check_alpha, classical_mean, ppi_mean, weighted_mean, z_interval


@dataclass(frozen=True)
class Share:
    """One label's share of the texts (of a group): the PPI++ estimate with its interval (``lam``: the weight it
    gave the predictions, 0 = the coded texts alone); the naive share of the model's labels with the interval
    that would hold if the model never erred; the coded texts' share alone with its interval."""

    label: str
    group: Optional[Hashable]
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
    n_texts: int


@dataclass(frozen=True)
class ShareDifference:
    """A label's share in ``group`` minus its share in ``reference`` (independent samples), PPI++ and coded-only."""

    label: str
    group: Hashable
    reference: Hashable
    estimate: float
    se: float
    lower: float
    upper: float
    classical: float
    classical_lower: float
    classical_upper: float


@dataclass(frozen=True)
class Prevalence:
    """The shares of every label (by group), and with groups the differences from the reference group."""

    shares: List[Share]
    differences: List[ShareDifference]
    alpha: float
    predictions: str
    n_failed: int  # texts whose annotation failed: left out, coded or not

    def share(self, label: str, group: Optional[Hashable] = None) -> Share:
        for s in self.shares:
            if s.label == label and s.group == group:
                return s
        raise InvalidArgumentError(f"no share of label {label!r}" + (f" in group {group!r}" if group is not None else ""))

    def rows(self) -> List[Dict[str, Any]]:
        """Shares, then differences, as dicts with one set of keys (a tidy table: ``estimand`` tells them apart)."""
        keys = set(Share.__dataclass_fields__) | set(ShareDifference.__dataclass_fields__)
        out = []
        for estimand, items in (("share", self.shares), ("difference", self.differences)):
            for item in items:
                row = dict.fromkeys(sorted(keys))
                row.update(asdict(item), estimand=estimand)
                out.append(row)
        return out


def _naive(hits: np.ndarray, alpha: float) -> Interval:
    p = float(hits.mean())
    return z_interval(p, math.sqrt(p * (1 - p) / len(hits)), alpha)


def _share(data: CodedTexts, label: str, group: Optional[Hashable], rows: np.ndarray, alpha: float,
           pi: Optional[np.ndarray]) -> Share:
    coded = rows[data.coded[rows]]
    uncoded = rows[~data.coded[rows]]
    if len(coded) < 2:
        where = f" in group {group!r}" if group is not None else ""
        raise InvalidArgumentError(f"{len(coded)} coded text{'s' if len(coded) != 1 else ''}{where}: an interval "
                                   "needs at least 2 (code more texts of the group, or leave it out)")
    k = data.labels.index(label)
    y = data.truth_is(label)[coded]
    f = data.predictions[:, k]
    if pi is None:
        est, lam = ppi_mean(y, f[coded], f[uncoded], alpha)
        classical = classical_mean(y, alpha)
    else:
        truth, drawn = data.truth_is(label)[rows], data.coded[rows]
        est, lam = weighted_mean(truth, f[rows], pi[rows], drawn, alpha)
        classical, _ = weighted_mean(truth, f[rows], pi[rows], drawn, alpha, lam=0.0)
    naive = _naive((data.predicted == k)[rows], alpha)
    return Share(label, group, est.estimate, est.se, est.lower, est.upper, lam, naive.estimate, naive.lower,
                 naive.upper, classical.estimate, classical.se, classical.lower, classical.upper, len(coded),
                 len(rows))


def _difference(a: Share, b: Share, alpha: float) -> ShareDifference:
    est = z_interval(a.estimate - b.estimate, math.hypot(a.se, b.se), alpha)
    classical = z_interval(a.classical - b.classical, math.hypot(a.classical_se, b.classical_se), alpha)
    return ShareDifference(a.label, a.group, b.group, est.estimate, est.se, est.lower, est.upper, classical.estimate,
                           classical.lower, classical.upper)


def _groups(by: Optional[Sequence[Hashable]], n: int) -> Tuple[List[Optional[Hashable]], Optional[np.ndarray]]:
    if by is None:
        return [None], None
    keys = list(by.tolist() if hasattr(by, "tolist") else by)
    if len(keys) != n:
        raise InvalidArgumentError(f"by has {len(keys)} groups for {n} annotations: give one per text")
    if any(k is None or (isinstance(k, float) and math.isnan(k)) for k in keys):
        raise InvalidArgumentError("by has missing groups (None or NaN): give every text a group, or leave it out")
    order = list(dict.fromkeys(keys))
    try:
        order = sorted(order)
    except TypeError:
        pass  # groups of mixed types keep their first appearance's order
    return order, np.array([order.index(k) for k in keys])


def _inclusion(inclusion_probs: Any, data: CodedTexts) -> Optional[np.ndarray]:
    if inclusion_probs is None:
        return None
    try:
        pi = np.array(inclusion_probs.tolist() if hasattr(inclusion_probs, "tolist") else list(inclusion_probs),
                      dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError("inclusion_probs must be numbers, one per annotation") from None
    if pi.shape != (data.n_given,) or not np.all((pi > 0) & (pi <= 1)):
        raise InvalidArgumentError(f"inclusion_probs must be {data.n_given} probabilities in (0, 1], one per "
                                   "annotation (CodingPlan.inclusion_probs)")
    return pi[data.kept]


def prevalence(annotations: Sequence[Any], truth: Sequence[Any], by: Optional[Sequence[Hashable]] = None,
               alpha: float = 0.05, predictions: str = "probs", reference: Optional[Hashable] = None,
               inclusion_probs: Optional[Sequence[float]] = None) -> Prevalence:
    """Each label's share of the texts, with intervals valid whatever the model's errors.

    ``annotations``: what ``annotate()`` returned for every text (or labels, with ``predictions="labels"``);
    ``truth``: the human code of each text, None (or NaN) where the text was not coded. The coded texts must be
    a random sample of the texts (of each group), coded without looking at the model's labels. Each label's
    share is estimated by PPI++ (prediction-powered inference with power tuning): the model's predictions on
    every text, corrected by its errors on the coded ones. ``predictions="probs"`` uses each label's probability
    (calibrated if the annotations were: a calibration fitted on these same coded texts makes the predictions
    depend on them, so calibrate with ``cross_fit()`` then), which gives narrower intervals than the labels when
    the probabilities carry information; ``"labels"`` uses the labels alone. Beside it: the naive share of the model's labels (its
    interval ignores the model's errors: do not report it) and the coded texts' share alone.

    ``by``: a group per text; shares are estimated within each group, and each group's difference from
    ``reference`` (the first group in sorted order unless given) with its interval. Texts whose annotation
    failed are left out (``n_failed``).

    ``inclusion_probs``: when the coded texts were drawn text by text with known probabilities (an active coding
    plan: ``plan_coding(..., active=True).inclusion_probs``), each text's probability of being coded. The
    estimates then weight the coded texts' errors by 1/probability (Horvitz-Thompson) and the intervals are
    design-based: they are about these texts, and stay valid however the probabilities favoured some texts."""
    alpha = check_alpha(alpha)
    if predictions not in ("probs", "labels"):
        raise InvalidArgumentError(f"predictions must be 'probs' or 'labels', got {predictions!r}")
    data = coded_texts(annotations, truth, predictions)
    pi = _inclusion(inclusion_probs, data)
    groups, group_of = _groups(by, data.n_given)
    if group_of is not None:
        group_of = group_of[data.kept]
    if reference is not None and reference not in groups:
        raise InvalidArgumentError(f"reference {reference!r} is not one of the groups {groups}")
    shares: List[Share] = []
    differences: List[ShareDifference] = []
    for label in data.labels:
        by_group = {g: _share(data, label, g, np.flatnonzero(group_of == i) if group_of is not None
                              else np.arange(data.n), alpha, pi) for i, g in enumerate(groups)}
        shares += by_group.values()
        if group_of is not None:
            ref = groups[0] if reference is None else reference
            differences += [_difference(by_group[g], by_group[ref], alpha) for g in groups if g != ref]
    return Prevalence(shares, differences, alpha, predictions, data.n_failed)
