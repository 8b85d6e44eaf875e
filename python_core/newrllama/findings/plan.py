"""How many more texts to code for an interval of a given width, and which: plan_coding()."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .coded import coded_texts
from .ppi import check_alpha, ppi_mean


@dataclass(frozen=True)
class CodingPlan:
    """``n_more`` texts to code (``texts``: their positions, a uniform random draw among the texts not coded
    yet, so that the coded texts stay a random sample and every interval stays valid) for PPI++ intervals of
    at most ``target_width`` on every label's share; ``widths``: each label's interval width now and
    ``expected_widths`` after coding them. ``reachable`` is False when no number of coded texts reaches the
    target (the uncoded texts' own variation sets a floor): ``n_more`` is then every uncoded text."""

    n_more: int
    texts: List[int]
    target_width: float
    widths: Dict[str, float]
    expected_widths: Dict[str, float]
    reachable: bool
    n_coded: int
    n_texts: int


def _width(z: float, lam: float, var_pred: float, var_rectifier: float, n: int, n_unlabeled: int) -> float:
    imputed = lam * lam * var_pred / n_unlabeled if n_unlabeled else 0.0
    return 2 * z * math.sqrt(imputed + var_rectifier / n)


def plan_coding(annotations: Sequence[Any], truth: Sequence[Any], target_width: float, alpha: float = 0.05,
                predictions: str = "probs", seed: Optional[int] = 0) -> CodingPlan:
    """The number of further texts to code so that every label's PPI++ interval (see prevalence()) is at most
    ``target_width`` wide, from the variances seen on the texts coded so far (``truth``: None where not coded;
    at least 2 coded), and a uniform random draw of that many uncoded texts to code next (``seed`` fixes it)."""
    alpha = check_alpha(alpha)
    if isinstance(target_width, bool) or not isinstance(target_width, (int, float)) or not 0 < target_width < 1:
        raise InvalidArgumentError(f"target_width must be a number in (0, 1), got {target_width!r}")
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
        interval, lam = ppi_mean(y, f[coded], f[uncoded], alpha)
        widths[label] = interval.upper - interval.lower
        var_rectifier = float(np.var(y - lam * f[coded]))
        var_pred = float(np.var(f))
        terms[label] = (lam, var_pred, var_rectifier)
        # Smallest n with width(n) <= target, the uncoded texts being n_total - n.
        n = next((m for m in range(len(coded), n_total + 1)
                  if _width(z, lam, var_pred, var_rectifier, m, n_total - m) <= target_width), None)
        needed.append(n)
    reachable = all(n is not None for n in needed)
    n_more = (max(needed) - len(coded)) if reachable else len(uncoded)
    rng = random.Random(seed)
    chosen = sorted(rng.sample(uncoded.tolist(), n_more))
    positions = [int(data.kept[i]) for i in chosen]
    after = len(coded) + n_more
    expected = {label: _width(z, *terms[label], after, n_total - after) for label in data.labels}
    return CodingPlan(n_more, positions, float(target_width), widths, expected, reachable, len(coded), n_total)
