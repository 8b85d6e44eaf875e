"""Prediction-powered inference (PPI++, Angelopoulos, Duchi and Zrnic 2023) on arrays: a mean and
least-squares coefficients from human codes on a sample and model predictions on every text.

The coded texts give the truth y and the prediction f; the uncoded ones only f. The estimate is the
prediction's mean over the uncoded texts (weighted by lambda) corrected by the coded texts' mean error
y - lambda * f: unbiased for any predictor and any lambda; lambda (power tuning, clipped to [0, 1]) is the
one that minimises the estimated variance, so the interval is never wider, asymptotically, than the coded
texts' alone (lambda = 0) and narrows as the predictions track the truth. Intervals are normal (z) intervals
from the estimated variance; the same inputs give the same figures as the authors' `ppi-python`."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional

import numpy as np

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class Interval:
    """An estimate, its standard error and its two-sided interval at level 1 - alpha."""

    estimate: float
    se: float
    lower: float
    upper: float


def z_interval(estimate: float, se: float, alpha: float) -> Interval:
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return Interval(float(estimate), float(se), float(estimate - z * se), float(estimate + z * se))


def check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise InvalidArgumentError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def _power_tuning(cov_truth_pred: float, var_pred: float, n: int, n_unlabeled: int) -> float:
    """The lambda that minimises the variance of the estimate, clipped to [0, 1]."""
    if n_unlabeled == 0 or var_pred <= 0:
        return 0.0
    return float(np.clip(cov_truth_pred / ((1 + n / n_unlabeled) * var_pred), 0.0, 1.0))


def ppi_mean(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray, alpha: float,
             lam: Optional[float] = None) -> "tuple[Interval, float]":
    """The PPI++ estimate of E[y] with its interval, and the lambda used."""
    n, n_unlabeled = len(y), len(f_unlabeled)
    if lam is None:
        cov = float(np.mean((y - y.mean()) * (f - f.mean())))
        var = float(np.var(np.concatenate([f, f_unlabeled]), ddof=1)) if n + n_unlabeled > 1 else 0.0
        lam = _power_tuning(cov, var, n, n_unlabeled)
    imputed = lam * float(f_unlabeled.mean()) if n_unlabeled else 0.0
    rectifier = y - lam * f
    estimate = imputed + float(rectifier.mean())
    var_imputed = lam * lam * float(np.var(f_unlabeled)) / n_unlabeled if n_unlabeled else 0.0
    se = float(np.sqrt(var_imputed + np.var(rectifier) / n))
    return z_interval(estimate, se, alpha), lam


def classical_mean(y: np.ndarray, alpha: float) -> Interval:
    """The coded texts alone: their mean with its normal interval."""
    return z_interval(float(y.mean()), float(np.std(y) / np.sqrt(len(y))), alpha)


def _least_squares(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(x, y, rcond=None)[0]


def _ols_estimate(x, y, f, x_unlabeled, f_unlabeled, lam: float) -> np.ndarray:
    imputed = _least_squares(x_unlabeled, lam * f_unlabeled) if len(f_unlabeled) else 0.0
    return imputed + _least_squares(x, y - lam * f)


def _ols_stats(theta, x, y, f, x_unlabeled, f_unlabeled, pooled: bool):
    """Per text, the gradients of the squared loss at theta (truth; prediction), and the inverse Hessian (over
    every text, or the coded ones alone once lambda is 0)."""
    grads = x * (x @ theta - y)[:, None]
    grads_pred = x * (x @ theta - f)[:, None]
    grads_pred_unlabeled = x_unlabeled * (x_unlabeled @ theta - f_unlabeled)[:, None]
    n, n_unlabeled = len(y), len(f_unlabeled)
    hessian = (x.T @ x + x_unlabeled.T @ x_unlabeled) / (n + n_unlabeled) if pooled else x.T @ x / n
    return grads, grads_pred, grads_pred_unlabeled, np.linalg.inv(hessian)


def _ols_lambda(grads, grads_pred, grads_pred_unlabeled, inv_hessian) -> float:
    """The lambda minimising the trace of the coefficients' covariance, clipped to [0, 1]."""
    n, n_unlabeled = len(grads), len(grads_pred_unlabeled)
    centred, centred_pred = grads - grads.mean(0), grads_pred - grads_pred.mean(0)
    cov = (centred.T @ centred_pred + centred_pred.T @ centred) / n
    var_pred = np.atleast_2d(np.cov(np.concatenate([grads_pred, grads_pred_unlabeled]).T))
    denom = 2 * (1 + n / n_unlabeled) * float(np.trace(inv_hessian @ var_pred @ inv_hessian))
    return float(np.clip(np.trace(inv_hessian @ cov @ inv_hessian) / denom, 0.0, 1.0)) if denom > 0 else 0.0


def ppi_ols(x: np.ndarray, y: np.ndarray, f: np.ndarray, x_unlabeled: np.ndarray, f_unlabeled: np.ndarray,
            alpha: float, lam: Optional[float] = None) -> "tuple[list, float]":
    """PPI++ least-squares coefficients of y on x (x holds every regressor, the intercept too): one Interval per
    column, and the lambda used (one for all coefficients: the one minimising the trace of their covariance).
    Lambda is tuned twice, as ppi-python does: at the estimate with lambda 1, then at the estimate that gave."""
    n, d = x.shape
    n_unlabeled = len(f_unlabeled)
    args = (x, y, f, x_unlabeled, f_unlabeled)
    if n_unlabeled == 0:
        lam = 0.0
    if lam is None:
        lam = 1.0
        for _ in range(2):
            lam = _ols_lambda(*_ols_stats(_ols_estimate(*args, lam), *args, pooled=True))
    theta = _ols_estimate(*args, lam)
    grads, grads_pred, grads_pred_unlabeled, inv_hessian = _ols_stats(theta, *args, pooled=lam != 0)
    var_unlabeled = np.atleast_2d(np.cov((lam * grads_pred_unlabeled).T)) if n_unlabeled > 1 else np.zeros((d, d))
    var = np.atleast_2d(np.cov((grads - lam * grads_pred).T))
    sigma = inv_hessian @ ((n / n_unlabeled if n_unlabeled else 0.0) * var_unlabeled + var) @ inv_hessian
    se = np.sqrt(np.diag(sigma) / n)
    return [z_interval(theta[j], se[j], alpha) for j in range(d)], lam


def classical_ols(x: np.ndarray, y: np.ndarray, alpha: float) -> list:
    """The coded texts alone: least squares with White's (HC0) heteroskedasticity-robust standard errors."""
    n = len(y)
    theta = _least_squares(x, y)
    grads = x * (x @ theta - y)[:, None]
    inv_hessian = np.linalg.inv(x.T @ x / n)
    sigma = inv_hessian @ (grads.T @ grads / n) @ inv_hessian
    se = np.sqrt(np.diag(sigma) / n)
    return [z_interval(theta[j], se[j], alpha) for j in range(x.shape[1])]


def weighted_mean(y: np.ndarray, f: np.ndarray, pi: np.ndarray, coded: np.ndarray, alpha: float,
                  lam: Optional[float] = None) -> "tuple[Interval, float]":
    """The mean of y over every text when the coded ones were drawn text by text with known probabilities pi
    (Poisson sampling, as an active coding plan draws them): the predictions' mean corrected by the coded texts'
    errors weighted by 1/pi (Horvitz-Thompson), with its design-based variance. y is read on coded texts only;
    lambda (clipped to [0, 1]) minimises the estimated variance, 0 gives the coded texts alone."""
    n_texts = len(f)
    w = np.where(coded, (1 - pi) / (pi * pi), 0.0)
    y0 = np.where(coded, y, 0.0)
    if lam is None:
        denom = float(np.sum(w * f * f))
        lam = float(np.clip(np.sum(w * y0 * f) / denom, 0.0, 1.0)) if denom > 0 else 0.0
    error = np.where(coded, y0 - lam * f, 0.0)
    estimate = (lam * float(f.sum()) + float(np.sum(np.where(coded, error / pi, 0.0)))) / n_texts
    se = float(np.sqrt(np.sum(w * error * error))) / n_texts
    return z_interval(estimate, se, alpha), lam
