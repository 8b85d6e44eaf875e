"""Calibration of label scores on a small hand-coded sample.

The correction is a multinomial logistic model on the order-free log-probabilities:
p(label | text) is proportional to exp(scale * log p_model(label | text) + offset[label]),
with an L2 penalty pulling ``scale`` to 1 and the offsets to 0, so that a few dozen coded
texts cannot overfit it: K + 1 numbers for K labels.

Two choices, made by measurement on the Reuters stories (bench/bench_validity.py, its results in
docs/benchmarks.md, "Labels on real text"):
- Whether and how much to calibrate is decided on the coded sample itself, unless a penalty is given: the
  strength from ``FITTED_PENALTIES`` with the smallest cross-validated log-loss (the right strength depends on how
  far off the model is, which no constant fits, and differs between draws of coded stories: the ``penalties`` of
  bench/results/validity-*.json), and that fit is applied only where the labels it gives the held-out coded texts
  agree with their codes better (Cohen's kappa) than the model's own labels do. Log-loss alone calibrated nearly
  always, since a fit nearly always predicts probabilities better, and lowered kappa on texts never coded in some
  draws (bench/bench_calibration.py, "Calibration on sets never tuned on" in docs/benchmarks.md). Without a gain
  the penalty is infinite (``NO_CALIBRATION``) and ``Calibration.calibrated`` False: it changes nothing.
- With ``balanced=True`` (the default) every label weighs the same in the fit whatever its
  share of the coded sample, so a rare label is not given up for the frequent one; the
  calibrated probabilities are then those of a corpus where the labels are equally
  frequent. ``balanced=False`` fits the coded sample's own shares.
Its figures of merit are cross-validated on the coded sample (``folds``-fold, shuffled with
a fixed seed), the choice of the penalty made anew inside each fold.
"""
from __future__ import annotations

import dataclasses

import json
import math
import os
import random
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .agreement import missing
from .annotation import check_annotations
from .annotation_frame import like_given
from .annotations import Annotations
from ..columns import column_values
from ..errors import AnnotationWarning, InvalidArgumentError
from .order_bias import softmax
from .provenance import Provenance
from .validation import validate

CALIBRATION_FORMAT = "newrllama-calibration-1"
_FLOOR = -100.0  # log-probabilities below this carry no information the fit could use
FITTED_PENALTIES = (0.001, 0.01, 0.1, 1.0, 10.0)
NO_CALIBRATION = math.inf
CRITERIA = ("kappa", "log-loss")


@dataclass(frozen=True)
class Calibration:
    """A fitted correction of label scores, with its cross-validated accuracy and kappa on the coded sample, and
    what made the labels it was fitted on: it applies only to labels made the same way (model, codebook, debias
    method). ``save()`` and ``Calibration.load()`` keep it in a small JSON file."""

    labels: Tuple[str, ...]
    scale: float
    offsets: Dict[str, float]
    n: int
    cv_accuracy: float
    cv_kappa: float
    penalty: float
    balanced: bool = True
    fitted_on: Optional[Provenance] = None  # what made the coded texts' labels (None: annotations that do not say)
    criterion: str = "kappa"  # what decided whether to calibrate (CRITERIA)

    @property
    def calibrated(self) -> bool:
        """False when the coded texts chose no calibration (an infinite penalty): it then changes nothing."""
        return not math.isinf(self.penalty)

    def probs(self, order_free: Dict[str, float]) -> Dict[str, float]:
        """Calibrated probabilities from one text's order-free probabilities."""
        z = [self.scale * _log(order_free[label]) + self.offsets[label] for label in self.labels]
        return dict(zip(self.labels, softmax(z)))

    def apply(self, annotations: Sequence[Any]) -> Any:
        """New annotations whose label and probs are calibrated (raw and order-free probabilities kept); given the
        data frame annotate() returned, the frame with its labels' columns calibrated."""
        out = []
        for a in check_annotations(annotations, "annotations", refit=True):
            if a.label is None:
                out.append(a)
                continue
            base = a.order_free_probs or a.probs
            if set(base) != set(self.labels):
                raise InvalidArgumentError(f"this calibration was fitted on the labels {list(self.labels)}, "
                                           f"not {list(base)}")
            if self.fitted_on is not None and a.provenance is not None:
                why = self.fitted_on.differs_from(a.provenance)
                if why:
                    raise InvalidArgumentError(f"this calibration was fitted on labels made otherwise ({why}): "
                                               "fit one on coded texts labelled this way")
            probs = self.probs(base)
            out.append(dataclasses.replace(a, label=max(probs, key=probs.get), probs=probs, order_free_probs=base))
        return like_given(annotations, Annotations(out))

    def to_dict(self) -> Dict[str, Any]:
        return {"format": CALIBRATION_FORMAT, "labels": list(self.labels), "scale": self.scale,
                "offsets": dict(self.offsets), "n": self.n, "cv_accuracy": self.cv_accuracy, "cv_kappa": self.cv_kappa,
                "penalty": self.penalty, "balanced": self.balanced,
                "fitted_on": self.fitted_on.to_dict() if self.fitted_on else None, "criterion": self.criterion}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Calibration":
        if not isinstance(d, dict) or d.get("format") != CALIBRATION_FORMAT:
            raise InvalidArgumentError(f"not a newrllama calibration (format {CALIBRATION_FORMAT!r})")
        try:
            labels = tuple(d["labels"])
            offsets = {label: float(d["offsets"][label]) for label in labels}
            return cls(labels, float(d["scale"]), offsets, int(d["n"]), float(d["cv_accuracy"]), float(d["cv_kappa"]),
                       float(d["penalty"]), bool(d["balanced"]),
                       Provenance.from_dict(d["fitted_on"]) if d.get("fitted_on") else None,
                       # files saved before the criterion was recorded were decided by log-loss
                       str(d.get("criterion", "log-loss")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"a calibration record that lacks or garbles {exc}") from None

    def save(self, path: Union[str, os.PathLike]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Calibration":
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read the calibration file {path}: {exc.strerror}") from None
        except ValueError:
            raise InvalidArgumentError(f"{path} is not JSON: not a calibration saved by Calibration.save()") from None
        return cls.from_dict(d)


def _log(p: float) -> float:
    return max(math.log(p), _FLOOR) if p > 0 else _FLOOR


def _weights(y: np.ndarray, balanced: bool) -> np.ndarray:
    """Each text's weight in the fit: 1, or with ``balanced`` n / (labels present * texts of its label)."""
    if not balanced:
        return np.ones(len(y))
    counts = np.bincount(y)
    return len(y) / (np.count_nonzero(counts) * counts[y])


def _log_softmax(z: np.ndarray) -> np.ndarray:
    top = z.max(axis=1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True))


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, penalty: float) -> np.ndarray:
    """Damped Newton on the penalised, weighted negative log-likelihood; x: texts x labels log-probabilities,
    y: label index, w: weights. Returns (scale, offsets...); an infinite penalty leaves them where it pulls."""
    n, k = x.shape
    prior = np.concatenate([[1.0], np.zeros(k)])  # scale, offsets: where the penalty pulls
    if math.isinf(penalty):
        return prior
    onehot = np.eye(k)[y]

    def objective(theta: np.ndarray) -> Tuple[float, np.ndarray]:
        z = theta[0] * x + theta[1:]
        log_p = _log_softmax(z)
        loss = -(w * log_p[np.arange(n), y]).sum()
        return float(loss + penalty * ((theta - prior) ** 2).sum()), np.exp(log_p)

    theta = prior.copy()
    value, p = objective(theta)
    for _ in range(100):
        # Each class's feature vector is (x_ik, e_k): gradient and Hessian of the objective.
        wp = p * w[:, None]
        residual = (p - onehot) * w[:, None]
        grad = np.concatenate([[(residual * x).sum()], residual.sum(axis=0)]) + 2 * penalty * (theta - prior)
        mean_x = (p * x).sum(axis=1)
        hess = np.zeros((k + 1, k + 1))
        hess[0, 0] = (w * ((p * x * x).sum(axis=1) - mean_x ** 2)).sum()
        hess[0, 1:] = hess[1:, 0] = (wp * x - wp * mean_x[:, None]).sum(axis=0)
        hess[1:, 1:] = np.diag(wp.sum(axis=0)) - wp.T @ p
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
    return theta


def fold_indices(n: int, folds: int, seed: int) -> List[List[int]]:
    """Positions 0..n-1 shuffled by seed and dealt into folds."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = min(folds, n)
    return [order[f::k] for f in range(k)]


def _held_out(x: np.ndarray, y: np.ndarray, balanced: bool, folds: List[List[int]], penalty: Optional[float],
              seed: int, criterion: str = "kappa") -> np.ndarray:
    """Each text's calibrated log-scores from a fit on the other folds (with no penalty given, the penalty chosen
    inside the fold by ``criterion``)."""
    z = np.full(x.shape, np.nan)  # a text with no other to fit on stays unscored
    for held in folds:
        train = np.setdiff1d(np.arange(len(y)), held)
        if len(train) == 0:
            continue
        theta = _fit(x[train], y[train], _weights(y[train], balanced),
                     penalty if penalty is not None else _choose_penalty(x[train], y[train], balanced, seed,
                                                                          criterion))
        z[held] = theta[0] * x[held] + theta[1:]
    return z


def _choose_penalty(x: np.ndarray, y: np.ndarray, balanced: bool, seed: int, criterion: str,
                    folds: int = 5) -> float:
    """Whether and how much to calibrate, decided on the coded texts alone: the fitted penalty with the smallest
    cross-validated (weighted) log-loss, kept where ``criterion`` says it beats no calibration (an infinite
    penalty): "kappa", where the labels it gives the held-out texts agree with their codes better than the
    model's own labels do; "log-loss", where it predicts them strictly better."""
    if len(y) < 2:
        return NO_CALIBRATION
    split = fold_indices(len(y), folds, seed)
    w = _weights(y, balanced)
    held = {penalty: _held_out(x, y, balanced, split, penalty, seed) for penalty in FITTED_PENALTIES}
    held[NO_CALIBRATION] = x

    def loss(penalty: float) -> float:
        return float(-(w * _log_softmax(held[penalty])[np.arange(len(y)), y]).sum())

    best = min(FITTED_PENALTIES, key=loss)
    better = _kappa(held[best], y) > _kappa(x, y) if criterion == "kappa" else loss(best) < loss(NO_CALIBRATION)
    return best if better else NO_CALIBRATION


def _kappa(scores: np.ndarray, y: np.ndarray) -> float:
    """Cohen's kappa of each row's highest score against the codes y (label indices)."""
    return validate([int(row.argmax()) for row in scores], [int(v) for v in y]).kappa


def warn_if_scored_in_one_order(coded: Sequence[Any], stacklevel: int) -> None:
    """Warns (AnnotationWarning) where coded texts were scored in one order by debias "auto" (short texts, labels not
    pending): the measured loss, and the call that scores them for calibration."""
    one_order = sum(a.order_flip is None and a.provenance is not None and a.provenance.debias == "auto"
                    and not a.provenance.for_calibration for a in coded)
    if one_order:
        warnings.warn(f"{one_order} of the {len(coded)} coded texts were scored in one order (debias 'auto' on short "
                      "texts, without calibration): a calibration fitted on one order's scores labelled held-back "
                      "texts worse than one fitted on two. Labelling again with the human codes as the calibration (one "
                      "per text, none where a text is not coded) scores every text in two orders and calibrates them "
                      "on the coded ones, in one call",
                      AnnotationWarning, stacklevel=stacklevel + 1)


def calibrate(annotations: Sequence[Any], truth: Sequence[Any], *, penalty: Optional[float] = None,
              balanced: bool = True, folds: int = 5, seed: int = 0, criterion: str = "kappa") -> Calibration:
    """Fits a Calibration to annotations (from annotate()) of hand-coded texts and their true labels.

    ``penalty`` None decides by cross-validation on the coded texts whether to calibrate and how strongly, by
    ``criterion``: "kappa" (the default, for labels) calibrates only where the held-out coded texts get labels
    that agree with their codes better; "log-loss" (for probabilities, as prevalence() and regression() use them)
    where their probabilities are predicted better. ``balanced`` weighs every label alike. Texts whose annotation
    failed or whose truth is missing (None or NaN) are left out."""
    annotations = check_annotations(annotations, "annotations", refit=True)
    truth = column_values(truth, "truth", "labels, one per annotation")
    if len(truth) != len(annotations):
        raise InvalidArgumentError(f"truth has {len(truth)} labels but there are {len(annotations)} annotations")
    if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float))
                                or not 0 < penalty < math.inf):
        raise InvalidArgumentError(f"penalty must be a positive number or None, got {penalty!r}")
    if not isinstance(balanced, bool):
        raise InvalidArgumentError(f"balanced must be True or False, got {balanced!r}")
    if criterion not in CRITERIA:
        raise InvalidArgumentError(f"criterion must be one of {list(CRITERIA)}, got {criterion!r}")
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
    fitted_on = next((a.provenance for a, _ in used if a.provenance is not None), None)
    for a, _ in used:
        why = fitted_on.differs_from(a.provenance) if fitted_on and a.provenance else None
        if why:
            raise InvalidArgumentError(f"the coded texts' labels were made in different ways ({why}): calibrate on "
                                       "one way's labels")
    warn_if_scored_in_one_order([a for a, _ in used], stacklevel=2)
    x = np.array([[_log((a.order_free_probs or a.probs)[label]) for label in labels] for a, _ in used])
    y = np.array([labels.index(t) for _, t in used])
    chosen = float(penalty) if penalty is not None else _choose_penalty(x, y, balanced, seed, criterion, folds)
    theta = _fit(x, y, _weights(y, balanced), chosen)
    held = _held_out(x, y, balanced, fold_indices(len(y), folds, seed), penalty, seed, criterion)
    v = validate([None if np.isnan(row).any() else labels[int(row.argmax())] for row in held], [t for _, t in used])
    return Calibration(labels, float(theta[0]), {label: float(o) for label, o in zip(labels, theta[1:])},
                       len(used), v.accuracy, v.kappa, chosen, balanced, fitted_on, criterion)
