"""regression() of a formula read against a data frame: the same coefficients as the matrix a user would build by
hand (dummies beside the first level, products, no intercept with - 1), from pandas and polars alike, with the
model's columns named; and a bad formula is a clear error."""
from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import newrllama

N = 300


def speeches(seed: int = 4) -> pd.DataFrame:
    """Party, year, and whether a speech discusses immigration: coded by hand on every third speech, the model's
    probability on all of them."""
    rng = np.random.default_rng(seed)
    party = rng.choice(["left", "green", "right"], size=N)
    year = rng.integers(2000, 2010, size=N).astype(float)
    truth = (rng.random(N) < 0.2 + 0.3 * (party == "right") + 0.02 * (year - 2000)).astype(float)
    prob = np.clip(0.7 * truth + 0.15 + rng.normal(0, 0.1, N), 0, 1)
    coded = np.where(np.arange(N) % 3 == 0, truth, np.nan)
    return pd.DataFrame({"party": party, "year": year, "immigration": coded, ".prob_immigration": prob})


def by_hand(d: pd.DataFrame, *columns: np.ndarray) -> np.ndarray:
    return np.column_stack(columns)


def figures(result: newrllama.Regression):
    return [(c.term, round(c.estimate, 12), round(c.lower, 12), round(c.upper, 12)) for c in result.coefficients]


def test_a_formula_gives_the_coefficients_of_the_matrix_built_by_hand():
    d = speeches()
    left, right = (d.party == "left").astype(float), (d.party == "right").astype(float)  # "green" sorts first
    x = by_hand(d, left, right, d.year)
    matrix = newrllama.regression(x, d.immigration, d[".prob_immigration"],
                                  names=["party[T.left]", "party[T.right]", "year"])
    formula = newrllama.regression("immigration ~ party + year", data=d, predicted=".prob_immigration")
    assert figures(formula) == figures(matrix)
    assert [c.term for c in formula.coefficients] == ["(Intercept)", "party[T.left]", "party[T.right]", "year"]
    assert formula.n_coded == N // 3 and formula.n_texts == N

    both = newrllama.regression("immigration ~ party * year - 1", data=d, predicted=d[".prob_immigration"])
    products = by_hand(d, left, right, d.year, left * d.year, right * d.year)
    assert figures(both) == figures(newrllama.regression(
        products, d.immigration, d[".prob_immigration"], intercept=False,
        names=["party[T.left]", "party[T.right]", "year", "party[T.left]:year", "party[T.right]:year"]))

    assert figures(newrllama.regression("immigration ~ party + year", data=pl.from_dict(d.to_dict("list")),
                                        predicted=".prob_immigration")) == figures(formula)


def test_a_categorical_keeps_its_own_order_and_a_numeric_column_can_be_taken_as_categories():
    d = speeches()
    d["party"] = pd.Categorical(d.party, categories=["right", "left", "green"])
    out = newrllama.regression("immigration ~ party", data=d, predicted=".prob_immigration")
    assert [c.term for c in out.coefficients] == ["(Intercept)", "party[T.left]", "party[T.green]"]
    d["wave"] = (d.year > 2004).astype(int)
    terms = [c.term for c in newrllama.regression("immigration ~ C(wave)", data=d,
                                                  predicted=".prob_immigration").coefficients]
    assert terms == ["(Intercept)", "wave[T.1]"]


def test_a_model_coded_regressor_by_its_column():
    d = speeches()
    d["words"] = 100 + 30 * np.nan_to_num(d.immigration, nan=0.5) + np.random.default_rng(1).normal(0, 5, N)
    by_formula = newrllama.regression("words ~ immigration + year", data=d,
                                      predicted_regressors={"immigration": ".prob_immigration"})
    by_matrix = newrllama.regression(by_hand(d, d.immigration, d.year), d.words, names=["immigration", "year"],
                                     predicted_regressors={"immigration": d[".prob_immigration"]})
    assert figures(by_formula) == figures(by_matrix)


@pytest.mark.parametrize("kwargs, message", [
    ({"x": "immigration party"}, "a formula is 'outcome ~ regressors'"),
    ({"x": "immigration ~ party - year"}, "only the intercept"),
    ({"x": "immigration ~ colour"}, "names the column 'colour', which the data frame does not have"),
    ({"x": "party ~ year"}, "must hold numbers or True/False"),
    ({"x": "immigration ~ year", "truth": [1.0] * N}, "give no truth"),
    ({"x": "immigration ~ year", "data": None}, "a formula is read against data="),
    ({"x": "immigration ~ year", "predicted_regressors": {"party": ".prob_immigration"}}, "not among the formula"),
    ({"x": np.ones((N, 1)), "truth": None}, "truth is missing"),
])
def test_bad_formulas_are_clear_errors(kwargs, message):
    args = {"data": speeches(), "predicted": ".prob_immigration", **kwargs}
    if not isinstance(args["x"], str):
        args.pop("data")
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.regression(**args)
