"""Whether coded texts given without their design look like a random sample of the texts.

Codes come with no design when the user passes a truth vector alone; the estimates then assume a simple random
sample. Texts chosen by the model's doubt (least_confident()) or by hand differ from the rest in what the model
says of them, which a random sample does not, beyond chance. Two tests compare the coded texts with the uncoded
ones, each at half the false-alarm rate (so that, under random sampling, the check warns at most that often):

- the model's confidence (each text's margin between its two most probable labels): a rank-sum test
  (Mann-Whitney), normal approximation with the tie correction; its tails are lighter than the normal's, so
  the approximation only ever understates how unusual a sample is;
- the model's label shares: the chi-square statistic of coded against uncoded label counts, its p-value from
  draws of the counts a random sample of the same size would have (multivariate hypergeometric, a fixed seed:
  the same texts get the same verdict).

Texts at the extreme of confidence are flagged from about 5 coded texts on (the rank-sum's z for the n least
confident of many texts is about sqrt(3 n))."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import CodingSampleWarning
from .coded import CodedTexts

FALSE_ALARM = 0.001  # the chance that a random sample is flagged
DRAWS = 9_999  # label-share draws: the smallest p-value they give, 1 / 10,000, is under FALSE_ALARM / 2
SEED = 20_241_205


@dataclass(frozen=True)
class SampleCheck:
    """How unlike a random sample the coded texts look: each test's p-value, and the verdict at FALSE_ALARM."""

    n_coded: int
    n_texts: int
    p_confidence: float
    p_label_shares: float
    coded_mean_margin: float
    uncoded_mean_margin: float

    @property
    def unlike_random(self) -> bool:
        return min(self.p_confidence, self.p_label_shares) < FALSE_ALARM / 2

    def reason(self) -> str:
        """What makes the coded texts unlike a random sample, in words."""
        parts = []
        if self.p_confidence < FALSE_ALARM / 2:
            side = "less" if self.coded_mean_margin < self.uncoded_mean_margin else "more"
            parts.append(f"the model is {side} sure of them than of the others (mean margin "
                         f"{self.coded_mean_margin:.3f} against {self.uncoded_mean_margin:.3f}; rank-sum test "
                         f"p = {self.p_confidence:.2g})")
        if self.p_label_shares < FALSE_ALARM / 2:
            parts.append(f"the model's labels are spread over them unlike over the others (chi-square p = "
                         f"{self.p_label_shares:.2g})")
        return " and ".join(parts)

    def warning(self, what: str) -> str:
        return (f"the {self.n_coded} coded texts do not look like a random sample of the {self.n_texts} texts: "
                f"{self.reason()}. A random sample differs this much less than {FALSE_ALARM:g} of the time. {what} "
                "assumes a simple random sample, as no design was given: codes of texts chosen by the model's doubt "
                "(least_confident()) or by hand serve to calibrate, not to estimate. Code a random sample "
                "(plan_coding()) or give the design the texts were drawn by (design=CodingDesign...)")


def check_sample(margins: np.ndarray, predicted: np.ndarray, coded: np.ndarray, n_labels: int
                 ) -> Optional[SampleCheck]:
    """The check for texts with these margins and model labels (indices), ``coded`` marking the coded ones; None
    where fewer than 2 texts are coded or uncoded (no comparison to make)."""
    n_coded, n = int(coded.sum()), len(coded)
    if n_coded < 2 or n - n_coded < 2:
        return None
    return SampleCheck(n_coded, n, _rank_sum_p(margins, coded), _label_shares_p(predicted, coded, n_labels),
                       float(margins[coded].mean()), float(margins[~coded].mean()))


def warn_if_unlike_random(data: CodedTexts, what: str) -> Optional[SampleCheck]:
    """Checks the coded texts of an estimate given no design, warning (CodingSampleWarning) where they do not look
    like a random sample; the check, where there was one to make."""
    check = check_sample(data.model_margins, data.model_predicted, data.coded, len(data.labels))
    if check is not None and check.unlike_random:
        warnings.warn(check.warning(what), CodingSampleWarning, stacklevel=3)
    return check


def _rank_sum_p(values: np.ndarray, coded: np.ndarray) -> float:
    """Two-sided p-value of the rank-sum of the coded values (average ranks for ties)."""
    _, inverse, ties = np.unique(values, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(ties) - (ties - 1) / 2)[inverse]  # each run of equal values gets its average rank
    n1, n = int(coded.sum()), len(values)
    n2 = n - n1
    variance = n1 * n2 / 12 * ((n + 1) - float((ties ** 3 - ties).sum()) / (n * (n - 1)))
    if variance <= 0:  # every value the same: no rank tells the coded texts apart
        return 1.0
    z = (ranks[coded].sum() - n1 * (n + 1) / 2) / math.sqrt(variance)
    return math.erfc(abs(z) / math.sqrt(2))


def _label_shares_p(predicted: np.ndarray, coded: np.ndarray, n_labels: int) -> float:
    """p-value of the chi-square statistic of the coded texts' label counts, from random samples' counts."""
    totals = np.bincount(predicted, minlength=n_labels)
    present = totals > 0
    totals = totals[present]
    if len(totals) < 2:
        return 1.0
    n1, n = int(coded.sum()), len(predicted)
    expected = totals * n1 / n
    spread = totals * (n1 / n) * (1 - n1 / n)  # both the coded and the uncoded cells, in one statistic

    def statistic(counts: np.ndarray) -> np.ndarray:
        return (((counts - expected) ** 2) / spread).sum(axis=-1)

    observed = statistic(np.bincount(predicted[coded], minlength=n_labels)[present])
    draws = np.random.default_rng(SEED).multivariate_hypergeometric(totals, n1, size=DRAWS)
    return float((1 + (statistic(draws) >= observed - 1e-9).sum()) / (DRAWS + 1))
