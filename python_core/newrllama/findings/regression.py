"""Least-squares and logistic coefficients of an outcome the model codes, with valid intervals: regression()."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from ..frames import Tabular
from .formula import check_formula_data, formula_matrix, formula_outcome, formula_values, parse_formula
from .design import CodingDesign, stated_design
from .design_glm import ppi_glm_design
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
class Regression(Tabular):
    """The coefficients of `regression()`, each with its PPI++ interval and the coded texts' own
    (classical) estimate, and the weight given to the model's predictions."""
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


def _table(x: Any, name: str) -> np.ndarray:
    try:
        m = np.array([[math.nan if v is None else v for v in row] if isinstance(row, (list, tuple)) else
                      (math.nan if row is None else row) for row in (x.tolist() if hasattr(x, "tolist") else x)],
                     dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be a texts x regressors table of numbers") from None
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or np.isinf(m).any():
        raise InvalidArgumentError(f"{name} must be a texts x regressors table of finite numbers")
    return m


def _regressors(x: Any, names: Optional[Sequence[str]]) -> "tuple[np.ndarray, List[str]]":
    m = _table(x, "x")
    names = list(names) if names is not None else [f"x{j + 1}" for j in range(m.shape[1])]
    if len(names) != m.shape[1]:
        raise InvalidArgumentError(f"names has {len(names)} entries for {m.shape[1]} regressors")
    return m, names


def _predicted_regressors(predicted_regressors: Any, m: np.ndarray, names: List[str]) -> np.ndarray:
    """The regressors as the model codes them: x with the predicted columns put in."""
    if isinstance(predicted_regressors, dict):
        out = m.copy()
        for name, values in predicted_regressors.items():
            if name not in names:
                raise InvalidArgumentError(f"predicted_regressors names {name!r}, which is not a regressor; the "
                                           f"regressors are {names}")
            out[:, names.index(name)] = _vector(values, f"predicted_regressors[{name!r}]", len(m), allow_missing=False)
        return out
    out = _table(predicted_regressors, "predicted_regressors")
    if out.shape != m.shape:
        raise InvalidArgumentError(f"predicted_regressors must be a table of x's shape {m.shape} (or a dict of "
                                   f"columns by name), got shape {out.shape}")
    if np.isnan(out).any():
        raise InvalidArgumentError("predicted_regressors has missing values: the model's value is needed for every text")
    return out


def _with_intercept(m: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones(len(m)), m])


def _coded_texts(m: np.ndarray, y: np.ndarray, outcome_coded_by_model: bool) -> np.ndarray:
    """The texts coded by hand: every model-coded value present. A text coded for some of them but not others is
    refused rather than dropped."""
    missing = np.isnan(m[:, np.isnan(m).any(axis=0)])
    if outcome_coded_by_model:
        missing = np.column_stack([missing, np.isnan(y)])
    partly = np.flatnonzero(missing.any(axis=1) & ~missing.all(axis=1))
    if len(partly):
        raise InvalidArgumentError(f"{len(partly)} texts (the first: row {int(partly[0]) + 1}) are coded for some "
                                   "model-coded variables and not others: code all of them or none")
    return ~missing.any(axis=1)


def regression(x: Any, truth: Any = None, predicted: Any = None, *, data: Any = None, predicted_regressors: Any = None,
               names: Optional[Sequence[str]] = None, intercept: bool = True, family: str = "gaussian",
               alpha: float = 0.05, design: Optional[CodingDesign] = None) -> Regression:
    """Coefficients of a regression in which the model codes the outcome, regressors, or both, and a random sample
    of the texts is coded by hand: least squares (``family="gaussian"``) or logistic regression (``"binomial"``:
    the truth 0 or 1, the prediction a probability).

    ``x``: the regressors of every text (texts x regressors; an intercept is added unless ``intercept=False``),
    a model-coded regressor holding the human code on coded texts and None or NaN elsewhere; ``truth``: the
    outcome (for a model-coded outcome, the human code, None or NaN where the text was not coded);
    ``predicted``: the model's prediction of the outcome for every text (e.g. the label's probability), None when
    the outcome is known for every text; ``predicted_regressors``: the model's value of each model-coded
    regressor for every text, a dict by regressor name (``names``, else ``x1``, ``x2``, ...) or a table of x's
    shape. PPI++ (power-tuned, as ppi-python's ``ppi_ols_ci`` and ``ppi_logistic_ci`` where only the outcome is
    model-coded; PPI++'s M-estimation where regressors are) gives each coefficient its interval; beside it, the
    fit on the coded texts alone. The coefficients are those of the process the texts come from (no
    finite-population correction).

    ``design`` (a CodingDesign): how the coded texts were drawn; a simple random sample unless given. For a
    stratified sample or texts drawn with known probabilities, each coded text is weighted by the inverse of its
    probability of being coded (within a stratum, the stratum's coded share), in the estimate and in the design-based
    interval (findings/design_glm.py); the coded-only figures are the weighted fit of the coded texts. Texts picked
    rather than drawn are refused. Without a design, the one ``truth`` carries (read_coding_sheet()'s) is taken.

    With a formula, ``regression("outcome ~ party + year", data=df, predicted=".prob_immigration")``: ``x`` is the
    formula, read against the pandas or polars DataFrame ``data`` as R's model.matrix() and statsmodels read one
    (findings/formula.py: categorical columns as 0/1 columns named ``party[T.level]`` beside the first level, ``a:b``
    and ``a*b`` for products, ``- 1`` to drop the intercept); the outcome is the formula's left side (no ``truth``);
    ``predicted`` and each value of ``predicted_regressors`` (by the regressor's column) may name a column of
    ``data``. The coefficients are those of the same regression given as a matrix."""
    if isinstance(x, str):
        return _formula_regression(x, truth, predicted, data, predicted_regressors, names, intercept, family, alpha,
                                   design)
    if data is not None:
        raise InvalidArgumentError("data= is read with a formula (regression(\"y ~ a + b\", data=df, ...)); x is a "
                                   "table of regressors")
    if truth is None:
        raise InvalidArgumentError("truth is missing: give the outcome of every text (the human code, None or NaN "
                                   "where the text was not coded), or a formula with data=")
    alpha = check_alpha(alpha)
    design = stated_design(design, truth)
    if design is not None:
        if not isinstance(design, CodingDesign):
            raise InvalidArgumentError(f"design must be a newrllama.CodingDesign, got {type(design).__name__}")
        design.check_estimable("regression()")
    if family not in ("gaussian", "binomial"):
        raise InvalidArgumentError(f"family must be 'gaussian' or 'binomial', got {family!r}")
    if not isinstance(intercept, bool):
        raise InvalidArgumentError(f"intercept must be True or False, got {intercept!r}")
    if predicted is None and predicted_regressors is None:
        raise InvalidArgumentError("nothing is model-coded: give predicted (the outcome's predictions), "
                                   "predicted_regressors, or both")
    m, terms = _regressors(x, names)
    mf = None if predicted_regressors is None else _predicted_regressors(predicted_regressors, m, terms)
    if mf is None and np.isnan(m).any():
        raise InvalidArgumentError("x has missing values: every text needs its regressors, unless the model codes "
                                   "them (predicted_regressors)")
    y = _vector(truth, "truth", len(m), allow_missing=predicted is not None)
    f = y if predicted is None else _vector(predicted, "predicted", len(m), allow_missing=False)
    if intercept:  # after predicted_regressors took x's shape: the true and the model's regressors both get it
        m, mf, terms = (_with_intercept(m), None if mf is None else _with_intercept(mf),
                        ["(Intercept)"] + terms)
    coded = _coded_texts(m, y, predicted is not None)
    if family == "binomial" and (not np.isin(y[coded], (0.0, 1.0)).all() or ((f < 0) | (f > 1)).any()):
        raise InvalidArgumentError("a binomial regression needs truth 0 or 1 (or missing) and predictions in [0, 1]")
    if coded.sum() <= m.shape[1]:
        raise InvalidArgumentError(f"{int(coded.sum())} coded texts for {m.shape[1]} coefficients: code more texts")
    if np.linalg.matrix_rank(m[coded]) < m.shape[1]:
        raise InvalidArgumentError("the regressors of the coded texts are collinear (a column repeats another, or is "
                                   "constant beside the intercept): drop one")
    if design is not None and design.kind in ("stratified", "probabilities"):
        x_model = m if mf is None else mf
        ppi, lam = ppi_glm_design(family, m[coded], y[coded], x_model, f, coded, design, alpha, known=mf is None)
        classical, _ = ppi_glm_design(family, m[coded], y[coded], x_model, f, coded, design, alpha, lam=0.0,
                                      known=mf is None)
    else:
        ppi, lam = ppi_glm(family, m[coded], y[coded], f[coded], (m if mf is None else mf)[~coded], f[~coded], alpha,
                           x_predicted=None if mf is None else mf[coded])
        classical = classical_glm(family, m[coded], y[coded], alpha)
    return Regression([Coefficient(t, p.estimate, p.se, p.lower, p.upper, c.estimate, c.se, c.lower, c.upper)
                       for t, p, c in zip(terms, ppi, classical)], lam, family, alpha, int(coded.sum()), len(m))


def _formula_regression(text: str, truth: Any, predicted: Any, data: Any, predicted_regressors: Any,
                        names: Optional[Sequence[str]], intercept: bool, family: str, alpha: float,
                        design: Optional[CodingDesign]) -> Regression:
    """regression() of a formula: its matrix, outcome and the model's columns, then the matrix's regression."""
    check_formula_data(data)
    if truth is not None:
        raise InvalidArgumentError("with a formula the outcome is its left side: give no truth")
    if names is not None or intercept is not True:
        raise InvalidArgumentError("with a formula the names come from it and '- 1' drops the intercept: give neither "
                                   "names nor intercept")
    formula = parse_formula(text)
    m, terms = formula_matrix(formula, data)
    mf = None
    if predicted_regressors is not None:
        if not isinstance(predicted_regressors, dict):
            raise InvalidArgumentError("with a formula, predicted_regressors is a dict: the regressor's column -> the "
                                       "model's values (or the name of their column)")
        used = {name for term in formula.terms for name, _ in term}
        unknown = sorted(set(predicted_regressors) - used)
        if unknown:
            raise InvalidArgumentError(f"predicted_regressors names {unknown}, not among the formula's regressors "
                                       f"{sorted(used)}")
        mf, _ = formula_matrix(formula, data, {name: formula_values(data, values, f"predicted_regressors[{name!r}]")
                                               for name, values in predicted_regressors.items()})
    return regression(m, formula_outcome(formula, data),
                      None if predicted is None else formula_values(data, predicted, "predicted"),
                      predicted_regressors=mf, names=terms, intercept=False, family=family, alpha=alpha, design=design)
