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


def _power_tuning(cov_truth_pred: float, var_pred: float, n: int, n_unlabeled: int, fpc: float = 1.0) -> float:
    """The lambda that minimises the variance of the estimate (its rectifier's part scaled by fpc), clipped to
    [0, 1]."""
    if n_unlabeled == 0 or var_pred <= 0 or fpc <= 0:
        return 0.0
    return float(np.clip(cov_truth_pred / ((1 + n / (fpc * n_unlabeled)) * var_pred), 0.0, 1.0))


def ppi_mean(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray, alpha: float,
             lam: Optional[float] = None, finite: bool = False) -> "tuple[Interval, float]":
    """The PPI++ estimate of E[y] with its interval, and the lambda used. ``finite``: the estimand is the mean over
    these texts, the coded ones a simple random sample of them: the rectifier's variance takes the
    finite-population correction 1 - n / N (the interval stays conservative, by lambda * cov / N in variance)."""
    n, n_unlabeled = len(y), len(f_unlabeled)
    fpc = n_unlabeled / (n + n_unlabeled) if finite else 1.0
    if lam is None:
        cov = float(np.mean((y - y.mean()) * (f - f.mean())))
        var = float(np.var(np.concatenate([f, f_unlabeled]), ddof=1)) if n + n_unlabeled > 1 else 0.0
        lam = _power_tuning(cov, var, n, n_unlabeled, fpc)
    imputed = lam * float(f_unlabeled.mean()) if n_unlabeled else 0.0
    rectifier = y - lam * f
    estimate = imputed + float(rectifier.mean())
    var_imputed = lam * lam * float(np.var(f_unlabeled)) / n_unlabeled if n_unlabeled else 0.0
    se = float(np.sqrt(var_imputed + fpc * np.var(rectifier) / n))
    return z_interval(estimate, se, alpha), lam


def classical_mean(y: np.ndarray, alpha: float, n_texts: Optional[int] = None) -> Interval:
    """The coded texts alone: their mean with its normal interval; with ``n_texts`` (the texts they were drawn
    from) for the mean over those texts, with the finite-population correction."""
    fpc = 1.0 - len(y) / n_texts if n_texts else 1.0
    return z_interval(float(y.mean()), float(np.std(y) * np.sqrt(fpc / len(y))), alpha)


def _least_squares(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(x, y, rcond=None)[0]


def _expit(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))  # no overflow at either end


def _positive_definite(hessian: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(hessian)
        return True
    except np.linalg.LinAlgError:
        return False


def _no_logistic_minimum() -> InvalidArgumentError:
    return InvalidArgumentError("the logistic fit does not converge: the regressors predict the coded texts' outcome "
                                "perfectly (separation), or it is constant; code more texts or drop a regressor")


def _logistic(x: np.ndarray, y: np.ndarray, xf: np.ndarray, f: np.ndarray, x_unlabeled: np.ndarray,
              f_unlabeled: np.ndarray, lam: float) -> np.ndarray:
    """The minimiser of the rectified logistic loss (the truth's loss on the coded texts, minus lam * the
    predictions' there, plus lam * the predictions' on the uncoded ones): Newton's method, each step halved until
    the loss falls. Convex for lam in [0, 1] when the regressors are known; with model-coded regressors (xf, the
    predicted ones, differs from x) it may not be, and a Hessian that is not positive definite means no minimum."""
    n, n_unlabeled = len(y), len(f_unlabeled)

    def loss(theta: np.ndarray) -> float:
        t, tf, t_u = x @ theta, xf @ theta, x_unlabeled @ theta
        out = np.sum(np.logaddexp(0, t) - y * t) / n - lam * np.sum(np.logaddexp(0, tf) - f * tf) / n
        return out + (lam * np.sum(np.logaddexp(0, t_u) - f_unlabeled * t_u) / n_unlabeled if n_unlabeled else 0.0)

    def found(theta: np.ndarray) -> np.ndarray:
        # The coded texts alone, a coded text fitted with certainty (a probability within e^-25 of 0 or 1):
        # separation, no finite minimum (the gradient vanishes in rounding before the steps grow).
        if lam == 0 and np.max(np.abs(x @ theta)) > 25:
            raise _no_logistic_minimum()
        return theta

    theta = np.zeros(x.shape[1])
    current = loss(theta)
    for _ in range(100):
        mu, mu_f, mu_u = _expit(x @ theta), _expit(xf @ theta), _expit(x_unlabeled @ theta)
        grad = x.T @ (mu - y) / n - lam * xf.T @ (mu_f - f) / n
        hessian = (x.T * (mu * (1 - mu))) @ x / n - lam * (xf.T * (mu_f * (1 - mu_f))) @ xf / n
        if n_unlabeled:
            grad = grad + lam * x_unlabeled.T @ (mu_u - f_unlabeled) / n_unlabeled
            hessian = hessian + lam * (x_unlabeled.T * (mu_u * (1 - mu_u))) @ x_unlabeled / n_unlabeled
        if np.max(np.abs(grad)) < 1e-14:
            return found(theta)
        if not _positive_definite(hessian):
            break
        step = np.linalg.solve(hessian, grad)
        for _ in range(60):
            trial = theta - step
            value = loss(trial)
            if value <= current:
                break
            step = step / 2
        if np.max(np.abs(trial - theta)) <= 1e-15 * (1 + np.max(np.abs(theta))):
            return found(trial)
        theta, current = trial, value
    raise _no_logistic_minimum()


def _least_squares_rectified(x, y, xf, f, x_unlabeled, f_unlabeled, lam: float) -> np.ndarray:
    """The minimiser of the rectified squared loss when regressors are model-coded (the normal equations of the
    truth's loss on the coded texts, minus lam * the predictions' there, plus lam * the predictions' on the uncoded
    ones); it has none when their Hessian is not positive definite."""
    n, n_unlabeled = len(y), len(f_unlabeled)
    hessian = (x.T @ x - lam * xf.T @ xf) / n
    rhs = (x.T @ y - lam * xf.T @ f) / n
    if n_unlabeled:
        hessian = hessian + lam * x_unlabeled.T @ x_unlabeled / n_unlabeled
        rhs = rhs + lam * x_unlabeled.T @ f_unlabeled / n_unlabeled
    if not _positive_definite(hessian):
        raise InvalidArgumentError(f"the rectified least-squares loss has no minimum at lambda {lam:g}: the model-coded "
                                   "regressors spread wider than the coded values")
    return np.linalg.solve(hessian, rhs)


def _estimate(family: str, x, y, xf, f, x_unlabeled, f_unlabeled, lam: float) -> np.ndarray:
    """xf: the coded texts' regressors as the model codes them, None where every regressor is known."""
    if family == "binomial":
        return _logistic(x, y, x if xf is None else xf, f, x_unlabeled, f_unlabeled, lam)
    if xf is not None:
        return _least_squares_rectified(x, y, xf, f, x_unlabeled, f_unlabeled, lam)
    # Known regressors: the imputed fit plus the fit of the errors, as ppi-python's ppi_ols.
    imputed = _least_squares(x_unlabeled, lam * f_unlabeled) if len(f_unlabeled) else 0.0
    return imputed + _least_squares(x, y - lam * f)


def _stats(family: str, theta, x, y, xf, f, x_unlabeled, f_unlabeled, pooled: bool):
    """Per text, the gradients of the loss at theta (truth; prediction), and the inverse Hessian (over every
    text when the regressors are known and pooled, else over the coded texts' true regressors alone)."""
    xf = x if xf is None else xf
    if family == "binomial":
        mean, mean_f, mean_u = _expit(x @ theta), _expit(xf @ theta), _expit(x_unlabeled @ theta)
        curve, curve_u = mean * (1 - mean), mean_u * (1 - mean_u)
    else:
        mean, mean_f, mean_u = x @ theta, xf @ theta, x_unlabeled @ theta
        curve, curve_u = np.ones(len(y)), np.ones(len(f_unlabeled))
    grads = x * (mean - y)[:, None]
    grads_pred = xf * (mean_f - f)[:, None]
    grads_pred_unlabeled = x_unlabeled * (mean_u - f_unlabeled)[:, None]
    n, n_unlabeled = len(y), len(f_unlabeled)
    coded = (x.T * curve) @ x
    hessian = (coded + (x_unlabeled.T * curve_u) @ x_unlabeled) / (n + n_unlabeled) if pooled else coded / n
    return grads, grads_pred, grads_pred_unlabeled, np.linalg.inv(hessian)


def _glm_lambda(grads, grads_pred, grads_pred_unlabeled, inv_hessian) -> float:
    """The lambda minimising the trace of the coefficients' covariance, clipped to [0, 1]."""
    n, n_unlabeled = len(grads), len(grads_pred_unlabeled)
    centred, centred_pred = grads - grads.mean(0), grads_pred - grads_pred.mean(0)
    cov = (centred.T @ centred_pred + centred_pred.T @ centred) / n
    var_pred = np.atleast_2d(np.cov(np.concatenate([grads_pred, grads_pred_unlabeled]).T))
    denom = 2 * (1 + n / n_unlabeled) * float(np.trace(inv_hessian @ var_pred @ inv_hessian))
    return float(np.clip(np.trace(inv_hessian @ cov @ inv_hessian) / denom, 0.0, 1.0)) if denom > 0 else 0.0


def _estimate_or_less(family: str, args: tuple, lam: float) -> "tuple[np.ndarray, float]":
    """The estimate at lam, or at the largest of lam / 2, lam / 4, ... (then 0) whose rectified loss has a minimum."""
    for _ in range(20):
        try:
            return _estimate(family, *args, lam), lam
        except InvalidArgumentError:
            lam /= 2
    return _estimate(family, *args, 0.0), 0.0


def ppi_glm(family: str, x: np.ndarray, y: np.ndarray, f: np.ndarray, x_unlabeled: np.ndarray,
            f_unlabeled: np.ndarray, alpha: float, lam: Optional[float] = None,
            x_predicted: Optional[np.ndarray] = None) -> "tuple[list, float]":
    """PPI++ coefficients of a least-squares ("gaussian") or logistic ("binomial") regression of y on x (x holds
    every regressor, the intercept too): one Interval per column, and the lambda used (one for all coefficients:
    the one minimising the trace of their covariance). Lambda is tuned twice, as ppi-python does: at the
    estimate with lambda 1, then at the estimate that gave. A logistic loss rectified with a lambda near 1 has
    no minimum when the predictions on the coded texts stray far from the codes (its linear part falls without
    end): a lambda without a minimum is then halved until it has one (the tuning starting from the coded texts
    alone at worst), where ppi-python would stop wherever its optimiser does.

    ``x_predicted``: when the model codes regressors too, the coded texts' regressors as the model codes them (x
    then holds their coded values, x_unlabeled the model's). The estimate is then the minimiser of the rectified
    loss in both families (PPI++'s M-estimation, the predictions' loss read at the predicted regressors), with the
    Hessian from the coded texts alone, since the uncoded texts' true regressors are unknown."""
    n, d = x.shape
    n_unlabeled = len(f_unlabeled)
    args = (x, y, x_predicted, f, x_unlabeled, f_unlabeled)
    known = x_predicted is None
    if n_unlabeled == 0:
        lam = 0.0
    if lam is None:
        start, _ = _estimate_or_less(family, args, 1.0)
        start, _ = _estimate_or_less(family, args, _glm_lambda(*_stats(family, start, *args, pooled=known)))
        theta, lam = _estimate_or_less(family, args, _glm_lambda(*_stats(family, start, *args, pooled=known)))
    else:
        theta = _estimate(family, *args, lam)
    grads, grads_pred, grads_pred_unlabeled, inv_hessian = _stats(family, theta, *args, pooled=known and lam != 0)
    var_unlabeled = np.atleast_2d(np.cov((lam * grads_pred_unlabeled).T)) if n_unlabeled > 1 else np.zeros((d, d))
    var = np.atleast_2d(np.cov((grads - lam * grads_pred).T))
    sigma = inv_hessian @ ((n / n_unlabeled if n_unlabeled else 0.0) * var_unlabeled + var) @ inv_hessian
    se = np.sqrt(np.diag(sigma) / n)
    return [z_interval(theta[j], se[j], alpha) for j in range(d)], lam


def classical_glm(family: str, x: np.ndarray, y: np.ndarray, alpha: float) -> list:
    """The coded texts alone, with sandwich standard errors (least squares: White's HC0; logistic: the
    gradients' sample covariance, as ppi-python's classical intervals)."""
    n = len(y)
    empty = np.zeros((0, x.shape[1]))
    theta = _estimate(family, x, y, None, y, empty, np.zeros(0), 0.0)
    grads, _, _, inv_hessian = _stats(family, theta, x, y, None, y, empty, np.zeros(0), pooled=False)
    meat = grads.T @ grads / n if family == "gaussian" else np.atleast_2d(np.cov(grads.T))
    se = np.sqrt(np.diag(inv_hessian @ meat @ inv_hessian) / n)
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
