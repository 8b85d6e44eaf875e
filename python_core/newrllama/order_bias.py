"""Label scores that do not depend on the order in which the labels are listed.

A model's score for a label moves with the label's place in the list. Three cures, each
a way to combine the log-probabilities of a text's labels under some of the list's K
cyclic rotations (in which every label takes every place once):
- "rotations": score every text under every rotation and average each label's
  log-probability over them (K times the work).
- "prior" (PriDe, Zheng et al., ICLR 2024): score a sample of the texts under every
  rotation; there a label's average over rotations is its order-free score, and what
  each place adds on top of it is that place's prior. Every other text is scored once,
  in the listed order, and each label's score has its place's prior taken off. The
  sample is 1 / (2 (K - 1)) of the texts, so the whole costs at most 1.5 times one order.
- "batch" (batch calibration, Zhou et al., 2023): score once and divide each label's
  probability by its mean over the call's texts (no extra work; it also removes any
  leaning towards a label that is not about order, and assumes the labels are about
  equally frequent in the call).
"none" leaves the listed order's scores as they are.
"""
from __future__ import annotations

import math
from typing import Dict, List, Literal, Sequence, Tuple

from .errors import InvalidArgumentError

Debias = Literal["prior", "rotations", "batch", "none"]
DEBIAS_METHODS = ("prior", "rotations", "batch", "none")


def check_debias(debias: object) -> str:
    if debias not in DEBIAS_METHODS:
        raise InvalidArgumentError(f"debias must be one of {', '.join(map(repr, DEBIAS_METHODS))}, got {debias!r}")
    return debias  # type: ignore[return-value]


def sample_of(texts: Sequence[int], n_labels: int) -> List[int]:
    """The texts scored under every rotation for "prior": evenly spaced, 1 / (2 (K - 1)) of them, at least one."""
    if not texts or n_labels < 2:
        return []
    n = min(len(texts), max(1, len(texts) // (2 * (n_labels - 1))))
    return [texts[(k * len(texts)) // n] for k in range(n)]


def scoring_jobs(debias: str, texts: Sequence[int], n_labels: int) -> List[Tuple[int, int]]:
    """(text, rotation) pairs to score; rotation 0 is the listed order."""
    everyone = [(i, 0) for i in texts]
    if debias == "rotations":
        return everyone + [(i, r) for i in texts for r in range(1, n_labels)]
    if debias == "prior":
        return everyone + [(i, r) for i in sample_of(texts, n_labels) for r in range(1, n_labels)]
    return everyone


def softmax(z: Sequence[float]) -> List[float]:
    top = max(z)
    w = [math.exp(v - top) for v in z]
    total = sum(w)
    return [v / total for v in w]


def _place(n_labels: int, label: int, rotation: int) -> int:
    """Where label (its index in the listed order) stands in the given rotation."""
    return (label - rotation) % n_labels


def order_free_scores(debias: str, scores: Dict[int, Dict[int, List[float]]], n_labels: int) -> Dict[int, List[float]]:
    """Each text's order-free log-scores (up to a constant) from its labels' log-probabilities by rotation.

    ``scores[text][rotation][label]``, labels indexed in the listed order."""
    if debias == "none":
        return {i: list(by_rot[0]) for i, by_rot in scores.items()}
    if debias == "batch":
        mean = [math.log(sum(math.exp(s[0][k]) for s in scores.values()) / len(scores)) for k in range(n_labels)]
        return {i: [s[0][k] - mean[k] for k in range(n_labels)] for i, s in scores.items()}
    averaged = {i: [sum(s[r][k] for r in s) / len(s) for k in range(n_labels)]
                for i, s in scores.items() if len(s) == n_labels}
    if debias == "rotations" or len(averaged) == len(scores):
        return averaged
    prior = place_prior({i: scores[i] for i in averaged}, averaged, n_labels)
    out = dict(averaged)
    for i, s in scores.items():
        if i not in out:
            out[i] = [s[0][k] - prior[_place(n_labels, k, 0)] for k in range(n_labels)]
    return out


def place_prior(scores: Dict[int, Dict[int, List[float]]], averaged: Dict[int, List[float]],
                n_labels: int) -> List[float]:
    """Each place's log-prior: what standing there adds to a label's log-probability over its order-free
    score, averaged over the rotations and texts that show it (PriDe's estimate), centred on 0."""
    prior = [0.0] * n_labels
    if not scores:  # every text of the sample failed: nothing to estimate from
        return prior
    for i, by_rot in scores.items():
        for r, logp in by_rot.items():
            for k in range(n_labels):
                prior[_place(n_labels, k, r)] += logp[k] - averaged[i][k]
    count = len(scores) * n_labels
    prior = [p / count for p in prior]
    centre = sum(prior) / n_labels
    return [p - centre for p in prior]
