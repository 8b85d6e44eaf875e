"""How many more texts to code for an interval of a given width, and which: plan_coding()."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Dict, Hashable, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .coded import coded_texts
from .design import CodingDesign, ordered_keys
from .ppi import check_alpha, ppi_mean


@dataclass(frozen=True)
class CodingPlan:
    """``n_more`` texts to code (``texts``: their positions, a uniform random draw among the texts not coded
    yet, so that the coded texts stay a random sample and every interval stays valid) for PPI++ intervals of
    at most ``target_width`` on every label's share; ``widths``: each label's interval width now and
    ``expected_widths`` after coding them. ``reachable`` is False when no number of coded texts reaches the
    target (the uncoded texts' own variation sets a floor): ``n_more`` is then every uncoded text.

    An active plan (``active=True``) draws the texts one by one with probabilities that favour those whose
    labels the model is least sure of (``n_more`` is then the expected number) and gives every text's
    probability of being coded in all (``inclusion_probs``), which prevalence() takes to weight the coded texts.
    A stratified plan (``strata=``) draws within each stratum. ``design`` is the design of the coded texts once
    these are coded, to give prevalence() and methods_text()."""

    n_more: int
    texts: List[int]
    target_width: Optional[float]
    widths: Dict[str, float]
    expected_widths: Dict[str, float]
    reachable: bool
    n_coded: int
    n_texts: int
    inclusion_probs: Optional[List[float]] = None  # active plans: each text's probability of being coded
    design: CodingDesign = CodingDesign.random()  # how the coded texts will have been drawn: for prevalence()


def _width(z: float, var_truth: float, cov: float, var_pred: float, n: int, n_unlabeled: int) -> float:
    """The expected PPI++ interval width with n coded texts and n_unlabeled uncoded ones, lambda tuned for them
    as prevalence() tunes it, from the coded texts' variance of the truth, its covariance with the predictions
    and the predictions' variance."""
    lam = min(max(cov / ((1 + n / n_unlabeled) * var_pred), 0.0), 1.0) if n_unlabeled and var_pred > 0 else 0.0
    imputed = lam * lam * var_pred / n_unlabeled if n_unlabeled else 0.0
    rectifier = max(var_truth - 2 * lam * cov + lam * lam * var_pred, 0.0)
    return 2 * z * math.sqrt(imputed + rectifier / n)


# An active draw's probabilities mix the model's uncertainty with this share of a uniform draw, so that no text's
# probability, and no weight 1/probability, is extreme.
UNIFORM_SHARE = 0.2


def _active_probs(probs: np.ndarray, uncoded: np.ndarray, n_more: int) -> np.ndarray:
    """Each text's probability of being drawn if uncoded: proportional to the spread of the model's
    probabilities (the standard deviation of a label drawn from them), mixed with a uniform share, scaled so that
    the uncoded texts' expect n_more, none above 1."""
    spread = np.sqrt(np.clip(1 - np.sum(probs * probs, axis=1), 0, None))
    q = (1 - UNIFORM_SHARE) * spread / max(spread.sum(), 1e-12) + UNIFORM_SHARE / len(probs)
    pi = np.zeros(len(q))
    capped = np.zeros(len(q), dtype=bool)
    for _ in range(len(q)):  # the texts that would exceed 1 take 1; the rest share what is left
        free = ~capped
        left = n_more - capped[uncoded].sum()
        pi[free] = left * q[free] / q[uncoded][free[uncoded]].sum() if left > 0 else 0.0
        pi[capped] = 1.0
        over = free & (pi > 1)
        if not over.any():
            break
        capped |= over
    return pi


def _stratified_draw(strata: np.ndarray, coded: np.ndarray, n_more: int, rng: random.Random) -> List[int]:
    """n_more uncoded texts drawn at random within strata, each stratum given what brings its coded count closest
    to its share of n_coded + n_more (largest remainders, never more than its uncoded texts)."""
    keys = ordered_keys(list(strata))
    members = {s: [i for i in range(len(strata)) if strata[i] == s] for s in keys}
    total = int(coded.sum()) + n_more
    want = {s: total * len(members[s]) / len(strata) for s in keys}
    room = {s: sum(not coded[i] for i in members[s]) for s in keys}
    take = {s: min(room[s], max(0, math.floor(want[s]) - int(coded[members[s]].sum()))) for s in keys}
    # What rounding and full strata leave goes to the strata furthest below their share, one text at a time.
    while sum(take.values()) < n_more:
        open_ = [s for s in keys if take[s] < room[s]]
        s = max(open_, key=lambda s: (want[s] - coded[members[s]].sum() - take[s], -keys.index(s)))
        take[s] += 1
    while sum(take.values()) > n_more:
        s = min((s for s in keys if take[s] > 0), key=lambda s: (want[s] - coded[members[s]].sum() - take[s]))
        take[s] -= 1
    chosen: List[int] = []
    for s in keys:
        chosen += rng.sample([i for i in members[s] if not coded[i]], take[s])
    return sorted(chosen)


def plan_coding(annotations: Sequence[Any], truth: Sequence[Any], target_width: Optional[float] = None, *,
                budget: Optional[int] = None, alpha: float = 0.05, predictions: str = "probs", seed: Optional[int] = 0,
                active: bool = False, strata: Optional[Sequence[Hashable]] = None) -> CodingPlan:
    """The number of further texts to code so that every label's PPI++ interval (see prevalence()) is at most
    ``target_width`` wide, from the variances seen on the texts coded so far (``truth``: None where not coded;
    at least 2 coded), and a uniform random draw of that many uncoded texts to code next (``seed`` fixes it).
    With ``budget`` instead of ``target_width``: that many texts (at most the uncoded ones), and the widths
    they are expected to give.

    ``strata`` (one per text, e.g. the source or the year): the texts are drawn at random within each stratum so
    that each stratum's coded share ends as close as the texts already coded allow to its share of the texts
    (proportional allocation); the plan's ``design`` then says so, for prevalence() to estimate stratum by
    stratum. The widths are those of a simple random sample of the same size, which proportional allocation
    does not exceed but for rounding."""
    alpha = check_alpha(alpha)
    if (target_width is None) == (budget is None):
        raise InvalidArgumentError("give target_width (the widest interval wanted) or budget (how many texts), not "
                                   "both or neither")
    if target_width is not None and (isinstance(target_width, bool) or not isinstance(target_width, (int, float))
                                     or not 0 < target_width < 1):
        raise InvalidArgumentError(f"target_width must be a number in (0, 1), got {target_width!r}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise InvalidArgumentError(f"budget must be a whole number of texts, at least 0, got {budget!r}")
    data = coded_texts(annotations, truth, predictions)
    coded = np.flatnonzero(data.coded)
    uncoded = np.flatnonzero(~data.coded)
    if len(coded) < 2:
        raise InvalidArgumentError(f"{len(coded)} coded texts: code at least 2 (a random sample) to plan from")
    z = NormalDist().inv_cdf(1 - alpha / 2)
    n_total = data.n
    widths, needed = {}, []
    terms = {}
    for k, label in enumerate(data.labels):
        y = data.truth_is(label)[coded]
        f = data.predictions[:, k]
        interval, _ = ppi_mean(y, f[coded], f[uncoded], alpha)
        widths[label] = interval.upper - interval.lower
        terms[label] = (float(np.var(y)), float(np.mean((y - y.mean()) * (f[coded] - f[coded].mean()))),
                        float(np.var(f)))
        # Smallest n with width(n) <= target, the uncoded texts being n_total - n.
        n = next((m for m in range(len(coded), n_total + 1)
                  if target_width is not None and _width(z, *terms[label], m, n_total - m) <= target_width), None)
        needed.append(n)
    reachable = all(n is not None for n in needed)
    if budget is not None:
        reachable, n_more = True, min(budget, len(uncoded))
    else:
        n_more = (max(needed) - len(coded)) if reachable else len(uncoded)
    if not isinstance(active, bool):
        raise InvalidArgumentError(f"active must be True or False, got {active!r}")
    if active and strata is not None:
        raise InvalidArgumentError("give active=True or strata, not both: an active plan draws text by text")
    rng = random.Random(seed)
    inclusion = None
    design = CodingDesign.random()
    if strata is not None:
        design = CodingDesign.stratified(strata)
        per_text = design.per_text(data.n_given, data.kept)
        chosen = _stratified_draw(per_text, data.coded, n_more, rng)
    elif active:
        pi = _active_probs(data.predictions, uncoded, n_more)
        chosen = [i for i in uncoded.tolist() if rng.random() < pi[i]]
        p0 = len(coded) / n_total
        inclusion = [p0] * data.n_given  # texts whose annotation failed are never estimated from
        for i in range(n_total):
            inclusion[int(data.kept[i])] = float(p0 + (1 - p0) * pi[i])
        design = CodingDesign.probabilities(inclusion)
    else:
        chosen = sorted(rng.sample(uncoded.tolist(), n_more))
    positions = [int(data.kept[i]) for i in chosen]
    after = len(coded) + n_more
    expected = {label: _width(z, *terms[label], after, n_total - after) for label in data.labels}
    return CodingPlan(n_more, positions, None if target_width is None else float(target_width), widths, expected,
                      reachable, len(coded), n_total, inclusion, design)
