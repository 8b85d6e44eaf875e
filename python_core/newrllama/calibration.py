"""Calibration of label scores on a small hand-coded sample.

The correction is a multinomial logistic model on the order-free log-probabilities:
p(label | text) is proportional to exp(scale * log p_model(label | text) + offset[label]),
with an L2 penalty pulling ``scale`` to 1 and the offsets to 0 (``penalty``), so that a
few dozen coded texts cannot overfit it: K + 1 numbers for K labels. Its figures of merit
are cross-validated on the coded sample (``folds``-fold, shuffled with a fixed seed).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgumentError
from .order_bias import softmax

_FLOOR = -100.0  # log-probabilities below this carry no information the fit could use


@dataclass(frozen=True)
class Calibration:
    """A fitted correction of label scores, with its cross-validated accuracy and kappa on the coded sample."""

    labels: Tuple[str, ...]
    scale: float
    offsets: Dict[str, float]
    n: int
    cv_accuracy: float
    cv_kappa: float
    penalty: float

    def probs(self, order_free: Dict[str, float]) -> Dict[str, float]:
        """Calibrated probabilities from one text's order-free probabilities."""
        z = [self.scale * _log(order_free[label]) + self.offsets[label] for label in self.labels]
        return dict(zip(self.labels, softmax(z)))

    def apply(self, annotations: Sequence[Any]) -> List[Any]:
        """New annotations whose label and probs are calibrated (raw and order-free probabilities kept)."""
        from .annotate import Annotation, check_annotations
        out = []
        for a in check_annotations(annotations, "annotations"):
            if a.label is None:
                out.append(a)
                continue
            base = a.order_free_probs or a.probs
            if set(base) != set(self.labels):
                raise InvalidArgumentError(f"this calibration was fitted on the labels {list(self.labels)}, "
                                           f"not {list(base)}")
            probs = self.probs(base)
            out.append(Annotation(max(probs, key=probs.get), probs, None, a.raw_probs, base))
        return out


def _log(p: float) -> float:
    return max(math.log(p), _FLOOR) if p > 0 else _FLOOR


def _fit(x: np.ndarray, y: np.ndarray, penalty: float) -> Tuple[float, np.ndarray]:
    """Damped Newton on the penalised negative log-likelihood; x: texts x labels log-probabilities, y: label index."""
    n, k = x.shape
    prior = np.concatenate([[1.0], np.zeros(k)])  # scale, offsets: where the penalty pulls
    onehot = np.eye(k)[y]

    def objective(theta: np.ndarray) -> Tuple[float, np.ndarray]:
        z = theta[0] * x + theta[1:]
        top = z.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        p = np.exp(z - log_norm[:, None])
        return float((log_norm - (z * onehot).sum(axis=1)).sum() + penalty * ((theta - prior) ** 2).sum()), p

    theta = prior.copy()
    value, p = objective(theta)
    for _ in range(100):
        # Each class's feature vector is (x_ik, e_k): gradient and Hessian of the objective.
        grad = np.concatenate([[((p - onehot) * x).sum()], (p - onehot).sum(axis=0)]) + 2 * penalty * (theta - prior)
        mean_x = (p * x).sum(axis=1)
        hess = np.zeros((k + 1, k + 1))
        hess[0, 0] = ((p * x * x).sum(axis=1) - mean_x ** 2).sum()
        hess[0, 1:] = hess[1:, 0] = (p * x - p * mean_x[:, None]).sum(axis=0)
        hess[1:, 1:] = np.diag(p.sum(axis=0)) - p.T @ p
        hess += 2 * penalty * np.eye(k + 1)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while True:
            new_value, new_p = objective(theta - t * step)
            if new_value <= value or t < 1e-6:
                break
            t /= 2
        theta, value, p = theta - t * step, new_value, new_p
        if np.abs(t * step).max() < 1e-9:
            break
    return float(theta[0]), theta[1:]


def calibrate(annotations: Sequence[Any], truth: Sequence[Any], *, penalty: float = 1.0, folds: int = 5,
              seed: int = 0) -> Calibration:
    """Fits a Calibration to annotations (from annotate()) of hand-coded texts and their true labels.

    Texts whose annotation failed or whose truth is missing (None or NaN) are left out."""
    from .agreement import missing
    from .validation import validate
    from .annotate import check_annotations
    annotations = check_annotations(annotations, "annotations")
    if isinstance(truth, (str, bytes)) or not isinstance(truth, Sequence):
        raise InvalidArgumentError("truth must be a list of labels, one per annotation")
    truth = list(truth)
    if len(truth) != len(annotations):
        raise InvalidArgumentError(f"truth has {len(truth)} labels but there are {len(annotations)} annotations")
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not 0 < penalty < math.inf:
        raise InvalidArgumentError(f"penalty must be a positive number, got {penalty!r}")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidArgumentError(f"folds must be an int of at least 2, got {folds!r}")
    used = [(a, t) for a, t in zip(annotations, truth) if a.label is not None and not missing(t)]
    if not used:
        raise InvalidArgumentError("no annotation with a label and a known truth to calibrate on")
    labels = tuple(used[0][0].order_free_probs or used[0][0].probs)
    for a, t in used:
        if set(a.order_free_probs or a.probs) != set(labels):
            raise InvalidArgumentError("the annotations do not all have the same labels")
        if t not in labels:
            raise InvalidArgumentError(f"truth holds {t!r}, which is not one of the labels {list(labels)}")
    x = np.array([[_log((a.order_free_probs or a.probs)[label]) for label in labels] for a, _ in used])
    y = np.array([labels.index(t) for _, t in used])
    scale, offsets = _fit(x, y, penalty)
    order = list(range(len(used)))
    random.Random(seed).shuffle(order)
    k = min(folds, len(used))
    predicted: List[Optional[str]] = [None] * len(used)
    for f in range(k):
        held = set(order[f::k])
        train = [i for i in range(len(used)) if i not in held]
        if not train:
            continue
        s, b = _fit(x[train], y[train], penalty)
        for i in held:
            predicted[i] = labels[int(np.argmax(s * x[i] + b))]
    v = validate(predicted, [t for _, t in used])
    return Calibration(labels, scale, {label: float(o) for label, o in zip(labels, offsets)}, len(used),
                       v.accuracy, v.kappa, float(penalty))
