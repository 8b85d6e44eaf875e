"""A regression's formula read against a data frame, as R's model.matrix() and statsmodels' formulas read one:
``outcome ~ a + b + a:b`` (``a*b`` for both and their product; ``0`` or ``-1`` drops the intercept, ``C(a)`` takes a
numeric column as categories). A numeric or True/False column is one regressor; any other column is categorical,
one 0/1 column per level but the first (the reference, in sorted order or the categorical's own), named
``a[T.level]`` as statsmodels names them."""
from __future__ import annotations

import math
import re
from itertools import combinations
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..columns import column_values
from ..errors import InvalidArgumentError
from ..labels.agreement import missing

INTERCEPT = "(Intercept)"
_NAME = re.compile(r"^(?:C\((?P<categorical>[^()]+)\)|(?P<plain>[^()]+))$")


@dataclass(frozen=True)
class Formula:
    """``outcome ~ terms``: each term the variables it multiplies, each variable a column and whether it is taken
    as categories."""

    outcome: str
    terms: Tuple[Tuple[Tuple[str, bool], ...], ...]
    intercept: bool


def parse_formula(text: str) -> Formula:
    if text.count("~") != 1:
        raise InvalidArgumentError(f"a formula is 'outcome ~ regressors', got {text!r}")
    left, right = (side.strip() for side in text.split("~"))
    if not left:
        raise InvalidArgumentError(f"the formula {text!r} has no outcome left of '~'")
    intercept, terms = True, []
    pieces = re.findall(r"([+-])\s*([^+-]+)", "+" + right)
    if not pieces or "".join(sign + term for sign, term in pieces).replace(" ", "") != ("+" + right).replace(" ", ""):
        raise InvalidArgumentError(f"cannot read the right side of the formula {text!r}")
    for sign, term in pieces:
        term = term.strip()
        if term in ("0", "1"):
            intercept = (term == "1") == (sign == "+")
            continue
        if sign == "-":
            raise InvalidArgumentError(f"the formula {text!r} removes {term!r}: only the intercept (- 1) can be removed")
        for expanded in _expand(term, text):
            if expanded not in terms:
                terms.append(expanded)
    return Formula(_variable(left, text)[0], tuple(terms), intercept)


def _expand(term: str, text: str) -> List[Tuple[Tuple[str, bool], ...]]:
    """a*b as a, b and a:b; a:b as the one product."""
    if "*" in term:
        factors = [_variable(f, text) for f in term.split("*")]
        out = []
        for size in range(1, len(factors) + 1):
            out += [tuple(factors[j] for j in chosen) for chosen in combinations(range(len(factors)), size)]
        return out
    return [tuple(_variable(f, text) for f in term.split(":"))]


def _variable(name: str, text: str) -> Tuple[str, bool]:
    found = _NAME.match(name.strip())
    if not found:
        raise InvalidArgumentError(f"cannot read {name.strip()!r} in the formula {text!r}: name a column, or C(column)")
    if found.group("categorical"):
        return found.group("categorical").strip(), True
    return found.group("plain").strip(), False


def column_of(data: Any, name: str, what: str) -> List[Any]:
    names = [str(c) for c in data.columns]
    if name not in names:
        raise InvalidArgumentError(f"{what} names the column {name!r}, which the data frame does not have; its "
                                   f"columns: {', '.join(names)}")
    return column_values(data[name], name, "values")


def _numeric(values: List[Any]) -> Optional[np.ndarray]:
    """The column as numbers (True/False as 1/0, None as NaN), or None where it holds anything else."""
    out = []
    for v in values:
        if missing(v):
            out.append(math.nan)
        elif isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
            out.append(float(v))
        else:
            return None
    return np.array(out, dtype=float)


def _levels(data: Any, name: str, values: List[Any]) -> List[Any]:
    """A categorical's own order where pandas or polars keeps one, else the sorted values."""
    series = data[name]
    categories = getattr(getattr(series, "cat", None), "categories", None)
    if categories is not None and not callable(categories):
        return list(categories)
    return sorted(set(values), key=lambda v: (str(type(v)), v))


def _encode(data: Any, variable: Tuple[str, bool], substitute: Dict[str, Any]) -> List[Tuple[str, np.ndarray]]:
    name, categorical = variable
    if name in substitute:
        values = column_values(substitute[name], f"the model's values of {name!r}", "numbers")
    else:
        values = column_of(data, name, "the formula")
    numbers = None if categorical else _numeric(values)
    if numbers is not None:
        return [(name, numbers)]
    if any(missing(v) for v in values):
        raise InvalidArgumentError(f"the categorical column {name!r} has missing values: every text needs one (a "
                                   "model-coded regressor must be a number, such as a label's 0 or 1)")
    levels = _levels(data, name, values)
    if len(levels) < 2:
        raise InvalidArgumentError(f"the categorical column {name!r} has one level only ({levels[0]!r}): drop it")
    return [(f"{name}[T.{level}]", np.array([float(v == level) for v in values])) for level in levels[1:]]


def formula_matrix(formula: Formula, data: Any, substitute: Optional[Dict[str, Any]] = None
                   ) -> Tuple[np.ndarray, List[str]]:
    """The regressors (texts x columns, the intercept first unless dropped) and their names; ``substitute``: values
    that take a column's place (the model's values of a model-coded regressor)."""
    substitute = substitute or {}
    n = len(data)
    columns: List[Tuple[str, np.ndarray]] = [(INTERCEPT, np.ones(n))] if formula.intercept else []
    for term in formula.terms:
        product: List[Tuple[str, np.ndarray]] = [("", np.ones(n))]
        for variable in term:
            product = [(f"{a}:{b}" if a else b, x * y) for a, x in product
                       for b, y in _encode(data, variable, substitute)]
        columns += product
    if not columns:
        raise InvalidArgumentError("the formula has no regressor and no intercept")
    return np.column_stack([c for _, c in columns]), [name for name, _ in columns]


def formula_outcome(formula: Formula, data: Any) -> np.ndarray:
    values = _numeric(column_of(data, formula.outcome, "the formula's outcome"))
    if values is None:
        raise InvalidArgumentError(f"the outcome {formula.outcome!r} must hold numbers or True/False (for a label: 1 "
                                   "if the text has it, 0 if not), None or NaN where the text was not coded")
    return values


def formula_values(data: Any, values: Any, what: str) -> Any:
    """A column named by a string, else the values given."""
    return column_of(data, values, what) if isinstance(values, str) else values


def check_formula_data(data: Any) -> None:
    if data is None or not hasattr(data, "columns"):
        raise InvalidArgumentError("a formula is read against data=, a pandas or polars DataFrame with its columns")
