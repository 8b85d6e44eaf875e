"""How common each label is, overall and by group, with valid intervals: prevalence()."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgumentError
from ..frames import Tabular
from .coded import CodedTexts, coded_texts, warn_if_failed
from .design import CodingDesign, ordered_keys, stated_design
from .ppi import Interval, check_alpha, classical_mean, ppi_mean, weighted_mean, z_interval
from .sample_check import warn_if_unlike_random


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
class Prevalence(Tabular):
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
           design: CodingDesign, per_text: Optional[np.ndarray]) -> Share:
    where = f" in group {group!r}" if group is not None else ""
    k = data.labels.index(label)
    truth, f = data.truth_is(label), data.predictions[:, k]
    if design.kind == "probabilities":
        _enough(int(data.coded[rows].sum()), where)
        drawn = data.coded[rows]
        est, lam = weighted_mean(truth[rows], f[rows], per_text[rows], drawn, alpha)
        classical, _ = weighted_mean(truth[rows], f[rows], per_text[rows], drawn, alpha, lam=0.0)
    else:
        cells = [rows] if per_text is None else [rows[per_text[rows] == s] for s in ordered_keys(per_text[rows])]
        parts = []
        for cell in cells:
            coded, uncoded = cell[data.coded[cell]], cell[~data.coded[cell]]
            _enough(len(coded), where + (f" in stratum {per_text[cell[0]]!r}" if per_text is not None else ""))
            parts.append((len(cell) / len(rows), *ppi_mean(truth[coded], f[coded], f[uncoded], alpha,
                                                           finite=design.finite),
                          classical_mean(truth[coded], alpha, len(cell) if design.finite else None)))
        est = _weighted([(w, e) for w, e, _, _ in parts], alpha)
        classical = _weighted([(w, c) for w, _, _, c in parts], alpha)
        lam = sum(w * lam for w, _, lam, _ in parts)
    naive = _naive((data.predicted == k)[rows], alpha)
    return Share(label, group, est.estimate, est.se, est.lower, est.upper, lam, naive.estimate, naive.lower,
                 naive.upper, classical.estimate, classical.se, classical.lower, classical.upper,
                 int(data.coded[rows].sum()), len(rows))


def _enough(n_coded: int, where: str) -> None:
    if n_coded < 2:
        raise InvalidArgumentError(f"{n_coded} coded text{'s' if n_coded != 1 else ''}{where}: an interval "
                                   "needs at least 2 (code more texts of the group, or leave it out)")


def _weighted(parts: List[Tuple[float, Interval]], alpha: float) -> Interval:
    """Strata's estimates combined with their shares of the texts as weights (one stratum: itself)."""
    if len(parts) == 1:
        return parts[0][1]
    return z_interval(sum(w * e.estimate for w, e in parts), math.sqrt(sum((w * e.se) ** 2 for w, e in parts)), alpha)


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
    order = ordered_keys(keys)
    return order, np.array([order.index(k) for k in keys])


def _design(design: Optional[CodingDesign], inclusion_probs: Optional[Sequence[float]]) -> CodingDesign:
    if inclusion_probs is not None:
        if design is not None:
            raise InvalidArgumentError("give design or inclusion_probs (CodingDesign.probabilities), not both")
        return CodingDesign.probabilities(inclusion_probs)
    if design is None:
        return CodingDesign.random()
    if not isinstance(design, CodingDesign):
        raise InvalidArgumentError(f"design must be a newrllama.CodingDesign, got {type(design).__name__}")
    return design


def prevalence(annotations: Sequence[Any], truth: Sequence[Any], by: Optional[Sequence[Hashable]] = None,
               alpha: float = 0.05, predictions: str = "probs", reference: Optional[Hashable] = None,
               inclusion_probs: Optional[Sequence[float]] = None, design: Optional[CodingDesign] = None) -> Prevalence:
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
    failed are left out (``n_failed``), and a FailedTextsWarning says so: the shares are then of the labelled texts
    alone (texts too long for the context, say, are not in them).

    ``design`` (a CodingDesign): how the coded texts were drawn. The default, a simple random sample, estimates
    each share among these texts: the coded share of them narrows the interval (finite-population correction;
    ``CodingDesign.random(finite=False)`` gives published PPI++, for the process the texts come from). A
    stratified sample (``CodingDesign.stratified(strata)``) is estimated stratum by stratum, each weighted by
    its share of the texts (of the group). Texts picked rather than drawn (``CodingDesign.picked(how)``, such as
    those least_confident() gives) are refused, with the reason. Without a design, the one ``truth`` carries
    (read_coding_sheet() reads it from beside the sheet) is taken; where there is none either, a random sample is
    assumed, and a CodingSampleWarning says so when the coded texts do not look like one (the model's confidence or
    label shares on them unlike on the others, beyond what a random sample shows once in 1,000 times;
    findings/sample_check.py).

    ``inclusion_probs`` (short for ``design=CodingDesign.probabilities(...)``): when the coded texts were drawn
    text by text with known probabilities (an active coding plan: ``plan_coding(..., active=True).inclusion_probs``),
    each text's probability of being coded. The estimates then weight the coded texts' errors by 1/probability
    (Horvitz-Thompson) and the intervals are design-based: they are about these texts, and stay valid however the
    probabilities favoured some texts."""
    alpha = check_alpha(alpha)
    if predictions not in ("probs", "labels"):
        raise InvalidArgumentError(f"predictions must be 'probs' or 'labels', got {predictions!r}")
    stated = stated_design(design, truth)
    design = _design(stated, inclusion_probs)
    design.check_estimable("prevalence()")
    data = coded_texts(annotations, truth, predictions)
    warn_if_failed(data, "prevalence()")
    if stated is None and inclusion_probs is None:
        warn_if_unlike_random(data, "prevalence()")
    per_text = design.per_text(data.n_given, data.kept)
    groups, group_of = _groups(by, data.n_given)
    if group_of is not None:
        group_of = group_of[data.kept]
    if reference is not None and reference not in groups:
        raise InvalidArgumentError(f"reference {reference!r} is not one of the groups {groups}")
    shares: List[Share] = []
    differences: List[ShareDifference] = []
    for label in data.labels:
        by_group = {g: _share(data, label, g, np.flatnonzero(group_of == i) if group_of is not None
                              else np.arange(data.n), alpha, design, per_text) for i, g in enumerate(groups)}
        shares += by_group.values()
        if group_of is not None:
            ref = groups[0] if reference is None else reference
            differences += [_difference(by_group[g], by_group[ref], alpha) for g in groups if g != ref]
    return Prevalence(shares, differences, alpha, predictions, data.n_failed)
