"""How the coded texts were chosen: the design every estimate from them rests on.

PPI's intervals hold when the coded texts are a probability sample of the texts: a simple random sample, a
random sample within each stratum, or texts drawn one by one with known probabilities. Texts picked by hand or
by the model's doubt (least_confident()) are not: the model's errors on them say nothing about its errors
elsewhere, so they serve to calibrate, not to estimate. With ``finite=True`` (the default) the estimand is the
share among the given texts, so the coded share of them narrows the interval (the finite-population correction:
with 40 of 70 texts coded, most of the answer is known); ``finite=False`` estimates it for the process the texts
come from, as published PPI++ does."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, List, Literal, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgumentError

DesignKind = Literal["random", "stratified", "probabilities", "picked"]


@dataclass(frozen=True)
class CodingDesign:
    """How the coded texts were drawn. Make one with ``CodingDesign.random()``, ``.stratified(strata)`` (one
    stratum per text; the coded texts a random sample of each), ``.probabilities(inclusion_probs)`` (each text's
    probability of being coded, as an active CodingPlan gives them) or ``.picked(how)`` (chosen, not drawn)."""

    kind: DesignKind = "random"
    strata: Optional[Tuple[Hashable, ...]] = None
    inclusion_probs: Optional[Tuple[float, ...]] = None
    how: Optional[str] = None
    finite: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("random", "stratified", "probabilities", "picked"):
            raise InvalidArgumentError(f"a coding design's kind is 'random', 'stratified', 'probabilities' or "
                                       f"'picked', got {self.kind!r}")
        if not isinstance(self.finite, bool):
            raise InvalidArgumentError(f"finite must be True or False, got {self.finite!r}")
        if (self.kind == "stratified") != (self.strata is not None):
            raise InvalidArgumentError("a stratified design, and only it, gives strata (one per text)")
        if (self.kind == "probabilities") != (self.inclusion_probs is not None):
            raise InvalidArgumentError("a design by probabilities, and only it, gives inclusion_probs (one per text)")
        if self.kind == "picked" and not (isinstance(self.how, str) and self.how.strip()):
            raise InvalidArgumentError("a picked design says how the texts were picked, e.g. "
                                       "CodingDesign.picked('the least confident labels')")

    @classmethod
    def random(cls, finite: bool = True) -> "CodingDesign":
        return cls("random", finite=finite)

    @classmethod
    def stratified(cls, strata: Sequence[Hashable], finite: bool = True) -> "CodingDesign":
        keys = list(strata.tolist() if hasattr(strata, "tolist") else strata)
        if any(k is None or (isinstance(k, float) and math.isnan(k)) for k in keys):
            raise InvalidArgumentError("strata has missing values (None or NaN): give every text its stratum")
        return cls("stratified", strata=tuple(keys), finite=finite)

    @classmethod
    def probabilities(cls, inclusion_probs: Sequence[float]) -> "CodingDesign":
        try:
            pi = [float(p) for p in (inclusion_probs.tolist() if hasattr(inclusion_probs, "tolist")
                                     else inclusion_probs)]
        except (TypeError, ValueError):
            raise InvalidArgumentError("inclusion_probs must be numbers, one per annotation") from None
        if not all(0 < p <= 1 for p in pi):
            raise InvalidArgumentError("inclusion_probs must be probabilities in (0, 1], one per annotation "
                                       "(CodingPlan.inclusion_probs)")
        return cls("probabilities", inclusion_probs=tuple(pi), finite=True)

    @classmethod
    def picked(cls, how: str) -> "CodingDesign":
        return cls("picked", how=how)

    def check_estimable(self, what: str) -> None:
        """Refuses a picked sample for an estimate, saying why and what to do instead."""
        if self.kind == "picked":
            raise InvalidArgumentError(
                f"the coded texts were picked ({self.how}), not drawn at random: {what} needs coded texts that are a "
                "probability sample of the texts, since the model's errors on picked texts say nothing of its errors "
                "elsewhere. Use the picked codes to calibrate (calibrate()), and code a random sample "
                "(plan_coding()) to estimate from")

    def per_text(self, n_given: int, kept: np.ndarray) -> Optional[np.ndarray]:
        """The strata or inclusion probabilities of the texts kept (whose annotation succeeded), checked to be one
        per annotation; None for the designs without either."""
        given = self.strata if self.kind == "stratified" else self.inclusion_probs
        name = "strata" if self.kind == "stratified" else "inclusion_probs"
        if given is None:
            return None
        if len(given) != n_given:
            raise InvalidArgumentError(f"{name} must be {n_given} values, one per annotation, got {len(given)}")
        values = np.empty(len(given), dtype=object if self.kind == "stratified" else float)
        values[:] = list(given)
        return values[kept]

    def sentence(self, n_coded: int, n_texts: int, strata_sizes: Optional[List[Tuple[Hashable, int, int]]] = None
                 ) -> str:
        """How the coded texts were drawn, for a methods section."""
        share = f"{n_coded} of the {n_texts} texts"
        finite = (" The intervals are for the share among these texts, with a finite-population correction."
                  if self.finite else " The intervals are for the process the texts come from (no finite-population "
                  "correction).")
        if self.kind == "random":
            return f"A simple random sample of {share} was coded by hand.{finite}"
        if self.kind == "stratified":
            cells = "; ".join(f"{s}: {n} of {size}" for s, n, size in strata_sizes or [])
            return (f"{share.capitalize()} were coded by hand, drawn at random within {len(strata_sizes or [])} strata "
                    f"({cells}); the strata were weighted by their sizes.{finite}")
        if self.kind == "probabilities":
            return (f"{share.capitalize()} were coded by hand, each text drawn with a known probability; the coded "
                    "texts were weighted by the inverse of their probabilities (Horvitz-Thompson), with design-based "
                    "intervals.")
        return f"{share.capitalize()} were coded by hand, picked {self.how}; they were used for calibration only."


def stated_design(design: Optional[CodingDesign], truth: object) -> Optional[CodingDesign]:
    """The design given, else the one the codes carry (read_coding_sheet()'s, from beside the sheet), else None:
    nothing says how the coded texts were chosen."""
    if design is not None:
        return design
    carried = getattr(truth, "design", None)
    return carried if isinstance(carried, CodingDesign) else None


def ordered_keys(keys: Sequence[Hashable]) -> List[Hashable]:
    """Distinct keys (groups, strata) in sorted order, or in order of first appearance when they do not sort."""
    order = list(dict.fromkeys(keys))
    try:
        return sorted(order)
    except TypeError:
        return order
