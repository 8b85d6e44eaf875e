"""Agreement among coders: Krippendorff's alpha among any number of coders, missing ratings allowed."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, List, Literal, Sequence

from ..errors import InvalidArgumentError

Level = Literal["nominal", "ordinal", "interval"]


def missing(x: Any) -> bool:
    """A rating or label that is not there: None or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's alpha and the share of agreeing pairs of ratings within units.

    Units with fewer than two ratings are left out of both (``n_units`` counts the rest).
    ``alpha`` is NaN when every rating has the same value (no variation to agree on)."""

    alpha: float
    percent_agreement: float
    level: Level
    n_units: int
    n_coders: int


def _ratings_by_unit(ratings: Any) -> List[List[Any]]:
    """Coders x units (lists, None or NaN for missing; or a 2-D array) -> the ratings each unit got."""
    if hasattr(ratings, "tolist"):
        ratings = ratings.tolist()
    if isinstance(ratings, (str, bytes)) or not isinstance(ratings, Sequence) or not ratings:
        raise InvalidArgumentError("ratings must be a non-empty list of coders' lists (coders x units) or a 2-D array")
    rows = []
    for i, row in enumerate(ratings):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise InvalidArgumentError(f"ratings[{i}] must be one coder's list of ratings, one per unit")
        rows.append(list(row))
    n_units = len(rows[0])
    if any(len(r) != n_units for r in rows):
        raise InvalidArgumentError("every coder must have one rating per unit (None or NaN where missing)")
    return [[r[u] for r in rows if not missing(r[u])] for u in range(n_units)]


def agreement(ratings: Any, level: Level = "nominal") -> Agreement:
    """Krippendorff's alpha from its definition: a coincidence matrix of the values paired within each unit
    (each pair weighted 1 / (m_u - 1) for a unit with m_u ratings), then alpha = 1 - D_observed / D_expected
    under the difference function of ``level``."""
    if level not in ("nominal", "ordinal", "interval"):
        raise InvalidArgumentError(f"level must be 'nominal', 'ordinal' or 'interval', got {level!r}")
    units = [u for u in _ratings_by_unit(ratings) if len(u) >= 2]
    if level != "nominal":
        for u in units:
            for v in u:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InvalidArgumentError(f"{level} ratings must be numbers, got {v!r}")
    if not units:
        raise InvalidArgumentError("no unit has two or more ratings: agreement is undefined")
    values = sorted({v for u in units for v in u}, key=repr if level == "nominal" else None)
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    coincidence = [[0.0] * k for _ in range(k)]
    agree_pairs = total_pairs = 0
    for u in units:
        m = len(u)
        counts = Counter(u)
        for a, na in counts.items():
            for b, nb in counts.items():
                pairs = na * (na - 1) if a == b else na * nb
                coincidence[index[a]][index[b]] += pairs / (m - 1)
        agree_pairs += sum(c * (c - 1) // 2 for c in counts.values())
        total_pairs += m * (m - 1) // 2
    n_c = [sum(row) for row in coincidence]
    n = sum(n_c)

    def delta2(i: int, j: int) -> float:
        if level == "nominal":
            return 0.0 if i == j else 1.0
        if level == "interval":
            return float(values[i] - values[j]) ** 2
        lo, hi = min(i, j), max(i, j)
        return (sum(n_c[lo:hi + 1]) - (n_c[lo] + n_c[hi]) / 2) ** 2

    observed = sum(coincidence[i][j] * delta2(i, j) for i in range(k) for j in range(k))
    expected = sum(n_c[i] * n_c[j] * delta2(i, j) for i in range(k) for j in range(k))
    alpha = math.nan if expected == 0 else 1 - (n - 1) * observed / expected
    n_coders = len(ratings.tolist() if hasattr(ratings, "tolist") else ratings)
    return Agreement(alpha=alpha, percent_agreement=agree_pairs / total_pairs, level=level, n_units=len(units),
                     n_coders=n_coders)
