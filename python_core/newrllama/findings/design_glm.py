"""PPI++ regression coefficients when the coded texts were not a simple random sample: drawn at random within strata,
or text by text with known probabilities.

Each coded text stands for 1/pi of the texts (pi: its probability of being coded; within a stratum, the stratum's
coded share). The estimating equation of the fit on every text, (1/N) sum psi_y(theta) = 0, is estimated without
bias by the predictions' equation over every text plus the coded texts' errors weighted by 1/pi (Horvitz-Thompson):

    (1/N) [ lam * sum_all psi_f(theta) + sum_coded (psi_y(theta) - lam * psi_f(theta)) / pi ] = 0.

Its root is the estimate. Its variance, by linearisation, is H^-1 V H^-1 with V the variance of the process's own
equation over the N texts (the coefficients are the process's, as regression() states) plus the design's variance of
the weighted error total: stratum by stratum N_h^2 (1 - n_h/N_h) S_h^2 / n_h for a stratified sample, and
sum (1 - pi) / pi^2 e e' for texts drawn one by one (Poisson sampling). lam (one for all coefficients, clipped to
[0, 1]) minimises the trace of that variance; lam = 0 is the coded texts alone, weighted."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from ..errors import InvalidArgumentError
from .design import CodingDesign, ordered_keys
from .ppi import Interval, z_interval


@dataclass(frozen=True)
class DesignWeights:
    """Per text: its probability of being coded, and its stratum's index (None: texts drawn one by one)."""

    pi: np.ndarray
    stratum: Optional[np.ndarray]

    @classmethod
    def of(cls, design: CodingDesign, coded: np.ndarray) -> "DesignWeights":
        values = design.per_text(len(coded), np.ones(len(coded), dtype=bool))
        if design.kind == "probabilities":
            return cls(np.asarray(values, dtype=float), None)
        keys = ordered_keys(list(values))
        stratum = np.array([keys.index(v) for v in values])
        pi = np.empty(len(coded))
        for h, key in enumerate(keys):
            cell = stratum == h
            n_h = int(coded[cell].sum())
            if n_h < 2:
                raise InvalidArgumentError(f"{n_h} coded text{'s' if n_h != 1 else ''} in stratum {key!r}: a "
                                           "stratified estimate needs at least 2 in each stratum")
            pi[cell] = n_h / int(cell.sum())
        return cls(pi, stratum)

    def total_variance(self, e: np.ndarray, coded: np.ndarray) -> np.ndarray:
        """The design's variance of the weighted total of e (rows: the coded texts' values, in text order)."""
        pi = self.pi[coded]
        if self.stratum is None:
            return (e.T * ((1 - pi) / (pi * pi))) @ e
        out = np.zeros((e.shape[1], e.shape[1]))
        strata = self.stratum[coded]
        for h in np.unique(strata):
            cell = e[strata == h]
            n_h, share = len(cell), pi[strata == h][0]
            centred = cell - cell.mean(0)
            out += (n_h / share) ** 2 * (1 - share) * (centred.T @ centred) / (n_h - 1) / n_h
        return out


def _expit(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _mean_and_curve(family: str, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    if family == "binomial":
        mu = _expit(t)
        return mu, mu * (1 - mu)
    return t, np.ones(len(t))


@dataclass(frozen=True)
class _Texts:
    x_coded: np.ndarray    # the coded texts' true regressors
    y: np.ndarray          # their codes
    x_model: np.ndarray    # every text's regressors as the model codes them (the true ones where known)
    f: np.ndarray          # every text's prediction
    coded: np.ndarray      # which texts are coded
    w: np.ndarray          # the coded texts' weights 1/pi
    known: bool            # every regressor known (the model codes only the outcome)

    def gradients(self, family: str, theta: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Per text, the loss gradients at theta: the truth's (coded texts) and the prediction's (every text)."""
        mu_y, _ = _mean_and_curve(family, self.x_coded @ theta)
        mu_f, _ = _mean_and_curve(family, self.x_model @ theta)
        return self.x_coded * (mu_y - self.y)[:, None], self.x_model * (mu_f - self.f)[:, None]

    def derivative(self, family: str, theta: np.ndarray, lam: float) -> np.ndarray:
        """The weighted equation's derivative in theta."""
        _, curve_y = _mean_and_curve(family, self.x_coded @ theta)
        _, curve_f = _mean_and_curve(family, self.x_model @ theta)
        coded_f = self.x_model[self.coded]
        out = lam * (self.x_model.T * curve_f) @ self.x_model
        out += (self.x_coded.T * (self.w * curve_y)) @ self.x_coded
        out -= lam * (coded_f.T * (self.w * curve_f[self.coded])) @ coded_f
        return out / len(self.f)

    def hessian(self, family: str, theta: np.ndarray, lam: float) -> np.ndarray:
        """The census equation's derivative, for the variance: over every text where the regressors are known (less
        noisy), else the weighted equation's."""
        if self.known:
            _, curve = _mean_and_curve(family, self.x_model @ theta)
            return (self.x_model.T * curve) @ self.x_model / len(self.f)
        return self.derivative(family, theta, lam)

    def equation(self, family: str, theta: np.ndarray, lam: float) -> np.ndarray:
        g_y, g_f = self.gradients(family, theta)
        return (lam * g_f.sum(0) + (self.w[:, None] * (g_y - lam * g_f[self.coded])).sum(0)) / len(self.f)


def _solve(family: str, texts: _Texts, lam: float) -> np.ndarray:
    """The root of the weighted equation: Newton's method on its own derivative (one step for least squares)."""
    theta = np.zeros(texts.x_model.shape[1])
    for _ in range(100):
        try:
            step = np.linalg.solve(texts.derivative(family, theta, lam), texts.equation(family, theta, lam))
        except np.linalg.LinAlgError:
            break
        theta = theta - step
        if np.max(np.abs(step)) <= 1e-12 * (1 + np.max(np.abs(theta))):
            return theta
        if np.max(np.abs(theta)) > 50:
            break
    raise InvalidArgumentError("the weighted fit does not converge: the regressors predict the coded texts' outcome "
                               "perfectly (separation), or it is constant; code more texts or drop a regressor")


def _variance(family: str, texts: _Texts, weights: DesignWeights, theta: np.ndarray, lam: float) -> np.ndarray:
    """The estimate's covariance: the process's variance of its equation over N texts, plus the design's."""
    n = len(texts.f)
    g_y, g_f = texts.gradients(family, theta)
    e = g_y - lam * g_f[texts.coded]
    w = texts.w / texts.w.sum()
    centred = g_y - (w[:, None] * g_y).sum(0)
    process = (centred.T * w) @ centred / n  # the coded texts' weighted covariance of psi_y, over N texts
    inv = np.linalg.inv(texts.hessian(family, theta, lam))
    return inv @ (process + weights.total_variance(e, texts.coded) / (n * n)) @ inv


def _tuned_lambda(family: str, texts: _Texts, weights: DesignWeights, theta: np.ndarray) -> float:
    """The lambda minimising the trace of the design part of the covariance (quadratic in lambda)."""
    g_y, g_f = texts.gradients(family, theta)
    g_fc = g_f[texts.coded]
    inv = np.linalg.inv(texts.hessian(family, theta, 1.0))
    plus = weights.total_variance(g_y + g_fc, texts.coded)
    minus = weights.total_variance(g_y - g_fc, texts.coded)
    cross = (plus - minus) / 4  # the design covariance of psi_y's and psi_f's totals
    var_f = weights.total_variance(g_fc, texts.coded)
    denom = float(np.trace(inv @ var_f @ inv))
    return float(np.clip(np.trace(inv @ cross @ inv) / denom, 0.0, 1.0)) if denom > 0 else 0.0


def ppi_glm_design(family: str, x_coded: np.ndarray, y: np.ndarray, x_model: np.ndarray, f: np.ndarray,
                   coded: np.ndarray, design: CodingDesign, alpha: float, lam: Optional[float] = None,
                   known: bool = True) -> Tuple[List[Interval], float]:
    """The coefficients with their intervals under ``design`` (stratified or by probabilities), and the lambda used
    (``lam=0``: the coded texts alone, weighted)."""
    weights = DesignWeights.of(design, coded)
    texts = _Texts(x_coded, y, x_model, f, coded, 1.0 / weights.pi[coded], known)
    if lam is None:
        start = _solve(family, texts, 1.0)
        lam = _tuned_lambda(family, texts, weights, _solve(family, texts, _tuned_lambda(family, texts, weights,
                                                                                         start)))
    theta = _solve(family, texts, lam)
    se = np.sqrt(np.diag(_variance(family, texts, weights, theta, lam)))
    return [z_interval(theta[j], se[j], alpha) for j in range(len(theta))], lam
