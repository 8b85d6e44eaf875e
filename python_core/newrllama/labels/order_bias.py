"""Label scores that do not depend on the order in which the labels are listed.

A model's score for a label moves with the label's place in the list. Each debias method scores a
text under one or more listing orders, starting from a base order, and combines its labels'
log-probabilities. The base order is the labels sorted (base_order), whatever order they
were given in, so that with any method but "none" the order a user lists the labels in cannot
change a score; the methods take out the pull of a place in the list, so that the sorted
order does not favour its first label either:
- "reverse": the base order and its reverse, each label's log-probabilities averaged.
  Every label then stands, on average, in the middle of the list, so a pull that grows or
  shrinks steadily along the list cancels (2 times the work). A list and its reverse give
  the very same scores.
- "rotations": every cyclic rotation of the base order (every label in every place once),
  averaged (K times the work for K labels).
- "prior" (PriDe, Zheng et al., ICLR 2024): a sample of the texts is scored under every
  rotation; there a label's average over rotations is its order-free score, and what each
  place adds on top of it is that place's prior. Every other text is scored once, in the
  base order, with its place's prior taken off each label. The sample is 1 / (2 (K - 1))
  of the texts, so the whole costs at most 1.5 times one order.
- "batch" (batch calibration, Zhou et al., 2023): the base order; each label's probability is
  divided by its mean over the call's texts (no extra work; it also removes any leaning
  towards a label that is not about order, and assumes the labels about equally frequent).
- "contextual" (contextual calibration, Zhao et al., ICML 2021): the base order; each label's
  probability is divided by its mean probability for content-free texts (CONTENT_FREE) scored
  with the same prompt, once per call and layout. Each text is scored once, and its correction
  depends on the codebook alone, not on the other texts (like "reverse", unlike "batch"); it
  also removes a leaning towards a label that a text with no content shows.
- "auto", the default: "contextual" for a text whose prompt lists the labels before it (a short text, see
  Codebook.lists_first), "reverse" for the others. On one-line texts the list costs more than the text, so
  a second order nearly doubles the work, and the model's leaning shows most where a text carries little
  evidence; on long texts the content-free texts stand poorly for the real ones, and "contextual" labelled
  worse than "reverse" (bench/bench_short_texts.py). A text's method depends on its length and the codebook
  alone, so it still does not depend on the other texts.
  Labels that are (or will be) calibrated on coded texts (annotate()'s ``calibration``) take "reverse" for every
  text: a calibration's offsets already take out what "contextual" does, so one order calibrated labelled
  held-back one-liners worse than two orders calibrated (bench/bench_calibration.py), and the calibrated default
  is then the calibrated "reverse".
- "none": the scores with the labels in the order given, as they are.
Which is the default, and why, is measured by bench/bench_short_texts.py and bench/bench_validity.py
(docs/benchmarks.md, "Short texts" and "Labels on real text").
"""
from __future__ import annotations

import math
from typing import Dict, List, Literal, Mapping, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError

Debias = Literal["auto", "reverse", "rotations", "prior", "batch", "contextual", "none"]
DEBIAS_METHODS = ("auto", "reverse", "rotations", "prior", "batch", "contextual", "none")
CONTENT_FREE = ("N/A", "[MASK]", "")  # Zhao et al.'s content-free inputs
DEFAULT_DEBIAS = "auto"
Order = Tuple[str, ...]


def check_debias(debias: object) -> str:
    if debias not in DEBIAS_METHODS:
        raise InvalidArgumentError(f"debias must be one of {', '.join(map(repr, DEBIAS_METHODS))}, got {debias!r}")
    return debias  # type: ignore[return-value]


def resolved_debias(debias: str, lists_first: bool, for_calibration: bool = False) -> str:
    """The debias method a text is scored with: "auto" resolved by the text's prompt layout and whether its labels are
    calibrated, any other as it is."""
    if debias != "auto":
        return debias
    return "contextual" if lists_first and not for_calibration else "reverse"


def base_order(debias: str, labels: Sequence[str]) -> Order:
    """The order a text is first scored in: the labels as given for "none", else sorted (casefolded, then as
    they are), so that the order they were given in does not reach the scores."""
    return tuple(labels) if debias == "none" else sorted_labels(labels)


def sorted_labels(labels: Sequence[str]) -> Order:
    return tuple(sorted(labels, key=lambda label: (label.casefold(), label)))


def rotations(labels: Sequence[str]) -> List[Order]:
    """Every cyclic rotation of the label list, the listed order first: each label once in each place."""
    labels = tuple(labels)
    return [labels[r:] + labels[:r] for r in range(len(labels))]


def sample_of(texts: Sequence[int], n_labels: int) -> List[int]:
    """The texts scored under every rotation for "prior": evenly spaced, 1 / (2 (K - 1)) of them, at least one."""
    if not texts or n_labels < 2:
        return []
    n = min(len(texts), max(1, len(texts) // (2 * (n_labels - 1))))
    return [texts[(k * len(texts)) // n] for k in range(n)]


def _orders(debias: str, labels: Order) -> List[Order]:
    """The orders every text is scored under, the base order first."""
    if debias == "reverse":
        return [labels] if labels == labels[::-1] else [labels, labels[::-1]]
    if debias == "rotations":
        return rotations(labels)
    return [labels]


def scoring_jobs(debias: str, texts: Sequence[int], labels: Sequence[str]) -> List[Tuple[int, Order]]:
    """(text, listing order) pairs to score; every text's first is ``labels``, the base order."""
    labels = tuple(labels)
    jobs = [(i, order) for i in texts for order in _orders(debias, labels)]
    if debias == "prior":
        jobs += [(i, order) for i in sample_of(texts, len(labels)) for order in rotations(labels)[1:]]
    return jobs


def softmax(z: Sequence[float]) -> List[float]:
    top = max(z)
    w = [math.exp(v - top) for v in z]
    total = sum(w)
    return [v / total for v in w]


def content_free_log_probs(probs: Sequence[Sequence[float]]) -> List[float]:
    """The "contextual" correction: the log of each label's mean probability over the content-free texts."""
    return [math.log(max(sum(p[k] for p in probs) / len(probs), 1e-300)) for k in range(len(probs[0]))]


def order_free_scores(debias: str, scores: Dict[int, Dict[Order, List[float]]], labels: Sequence[str],
                      base: Sequence[str], content_free: Optional[Mapping[int, Sequence[float]]] = None
                      ) -> Dict[int, List[float]]:
    """Each text's order-free log-scores (up to a constant) from its labels' log-probabilities by listing order.

    ``scores[text][order][k]`` is the log-probability of ``labels[k]`` with the labels listed in ``order``;
    ``base`` is the order every text was scored in (scoring_jobs); ``content_free[text]``, for "contextual",
    the correction of the text's prompt layout (content_free_log_probs)."""
    labels, base = tuple(labels), tuple(base)
    k_range = range(len(labels))
    if debias == "none":
        return {i: list(s[base]) for i, s in scores.items()}
    if debias == "contextual":
        if content_free is None:
            raise ValueError("debias='contextual' needs the content-free correction of every text")
        return {i: [s[base][k] - content_free[i][k] for k in k_range] for i, s in scores.items()}
    if debias == "batch":
        mean = [math.log(sum(math.exp(s[base][k]) for s in scores.values()) / len(scores)) for k in k_range]
        return {i: [s[base][k] - mean[k] for k in k_range] for i, s in scores.items()}
    averaged = {i: [sum(logp[k] for logp in s.values()) / len(s) for k in k_range] for i, s in scores.items()}
    if debias != "prior":
        return averaged
    full = {i for i, s in scores.items() if len(s) == len(labels)}
    prior = place_prior({i: scores[i] for i in full}, averaged, labels)
    return {i: averaged[i] if i in full else [scores[i][base][k] - prior[k] for k in k_range] for i in scores}


def place_prior(scores: Dict[int, Dict[Order, List[float]]], averaged: Dict[int, List[float]],
                labels: Order) -> List[float]:
    """Each place's log-prior: what standing there adds to a label's log-probability over its order-free
    score, averaged over the orders and texts that show it (PriDe's estimate), centred on 0."""
    prior = [0.0] * len(labels)
    if not scores:  # every text of the sample failed: nothing to estimate from
        return prior
    for i, by_order in scores.items():
        for order, logp in by_order.items():
            for k, label in enumerate(labels):
                prior[order.index(label)] += logp[k] - averaged[i][k]
    count = len(scores) * len(labels)
    prior = [p / count for p in prior]
    centre = sum(prior) / len(labels)
    return [p - centre for p in prior]
