"""Least-squares and logistic coefficients of an outcome the model codes, with valid intervals: regression()."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .ppi import check_alpha, classical_glm, ppi_glm


@dataclass(frozen=True)
class Coefficient:
    """One regressor's coefficient: PPI++ and from the coded texts alone (sandwich standard errors)."""

    term: str
    estimate: float
    se: float
    lower: float
    upper: float
    classical: float
    classical_se: float
    classical_lower: float
    classical_upper: float


@dataclass(frozen=True)
class Regression:
    coefficients: List[Coefficient]
    lam: float  # the weight given to the predictions (0: the coded texts alone)
    family: str
    alpha: float
    n_coded: int
    n_texts: int

    def coefficient(self, term: str) -> Coefficient:
        for c in self.coefficients:
            if c.term == term:
                return c
        raise InvalidArgumentError(f"no coefficient {term!r}; the terms are {[c.term for c in self.coefficients]}")

    def rows(self) -> List[Dict[str, Any]]:
        return [asdict(c) for c in self.coefficients]


def _vector(values: Any, name: str, n: Optional[int], allow_missing: bool) -> np.ndarray:
    try:
        v = np.array([math.nan if x is None else x for x in (values.tolist() if hasattr(values, "tolist") else values)],
                     dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must hold numbers (None or NaN where missing)") from None
    if v.ndim != 1 or (n is not None and len(v) != n):
        raise InvalidArgumentError(f"{name} must have one number per text ({n}), got shape {v.shape}")
    if not allow_missing and np.isnan(v).any():
        raise InvalidArgumentError(f"{name} has missing values: every text needs one")
    if np.isinf(v).any():
        raise InvalidArgumentError(f"{name} has infinite values")
    return v


def _regressors(x: Any, names: Optional[Sequence[str]], intercept: bool) -> "tuple[np.ndarray, List[str]]":
    try:
        m = np.array(x.tolist() if hasattr(x, "tolist") else x, dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError("x must be a texts x regressors table of numbers") from None
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or not np.isfinite(m).all():
        raise InvalidArgumentError("x must be a texts x regressors table of finite numbers")
    names = list(names) if names is not None else [f"x{j + 1}" for j in range(m.shape[1])]
    if len(names) != m.shape[1]:
        raise InvalidArgumentError(f"names has {len(names)} entries for {m.shape[1]} regressors")
    if intercept:
        m = np.column_stack([np.ones(len(m)), m])
        names = ["(Intercept)"] + names
    return m, names


def regression(x: Any, truth: Any, predicted: Any, *, names: Optional[Sequence[str]] = None, intercept: bool = True,
               family: str = "gaussian", alpha: float = 0.05) -> Regression:
    """Coefficients of an outcome coded by hand on a sample and predicted by the model for every text: least
    squares (``family="gaussian"``) or logistic regression (``"binomial"``: the truth 0 or 1, the prediction a
    probability).

    ``x``: the regressors of every text (texts x regressors; an intercept is added unless ``intercept=False``);
    ``truth``: the human code (a number, e.g. 1 if a text has the label and 0 if not), None or NaN where the text
    was not coded; ``predicted``: the model's prediction of it for every text (e.g. the label's probability). The
    coded texts must be a random sample. PPI++ (power-tuned, as ppi-python's ``ppi_ols_ci`` and
    ``ppi_logistic_ci``) gives each coefficient its interval; beside it, the fit on the coded texts alone."""
    alpha = check_alpha(alpha)
    if family not in ("gaussian", "binomial"):
        raise InvalidArgumentError(f"family must be 'gaussian' or 'binomial', got {family!r}")
    if not isinstance(intercept, bool):
        raise InvalidArgumentError(f"intercept must be True or False, got {intercept!r}")
    m, terms = _regressors(x, names, intercept)
    y = _vector(truth, "truth", len(m), allow_missing=True)
    f = _vector(predicted, "predicted", len(m), allow_missing=False)
    coded = ~np.isnan(y)
    if family == "binomial" and (not np.isin(y[coded], (0.0, 1.0)).all() or ((f < 0) | (f > 1)).any()):
        raise InvalidArgumentError("a binomial regression needs truth 0 or 1 (or missing) and predictions in [0, 1]")
    if coded.sum() <= m.shape[1]:
        raise InvalidArgumentError(f"{int(coded.sum())} coded texts for {m.shape[1]} coefficients: code more texts")
    if np.linalg.matrix_rank(m[coded]) < m.shape[1]:
        raise InvalidArgumentError("the regressors of the coded texts are collinear (a column repeats another, or is "
                                   "constant beside the intercept): drop one")
    ppi, lam = ppi_glm(family, m[coded], y[coded], f[coded], m[~coded], f[~coded], alpha)
    classical = classical_glm(family, m[coded], y[coded], alpha)
    return Regression([Coefficient(t, p.estimate, p.se, p.lower, p.upper, c.estimate, c.se, c.lower, c.upper)
                       for t, p, c in zip(terms, ppi, classical)], lam, family, alpha, int(coded.sum()), len(m))
