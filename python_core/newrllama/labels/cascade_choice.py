"""A cascade's share chosen from a coded sample: the smallest share of least-sure texts whose labels, the second
model's for those texts and the first model's for the rest, agree with the human codes about as well as the best
share's.

The second model labels only the coded texts for the choice (the whole corpus is labelled once the share is
chosen, by annotate(..., cascade=choice.cascade(model))). Each share's rule is the one annotate() applies: the texts
whose first-model margin ranks among the least sure of all the texts, so the coded texts the second model's labels
take are those the cascade will send. The choice reads the codes, so estimates from the same codes depend on it a
little: choose on a pilot sample and estimate from another, or report the choice with the estimate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from ..columns import column_values
from ..errors import InvalidArgumentError
from ..frames import Tabular
from .agreement import missing
from .annotation import check_annotations
from .cascade import Cascade, least_sure
from .validation import validate

SHARES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class CascadeChoice(Tabular):
    """``share``: the smallest share whose Cohen's kappa on the coded texts is within ``tolerance`` of the best
    share's; ``by_share``: each share tried with its kappa (share 1.0: the second model alone); ``first_kappa``: the
    first model alone; ``n_coded``: the coded texts both models labelled."""

    share: float
    tolerance: float
    first_kappa: float
    by_share: Tuple[Tuple[float, float], ...]
    n_coded: int

    def cascade(self, model: Any) -> Cascade:
        """The cascade to annotate with: ``model`` the second model (as Cascade takes it), the chosen share."""
        return Cascade(model, share=self.share)

    def rows(self) -> List[Dict[str, Any]]:
        return [{"share": share, "kappa": kappa, "chosen": share == self.share} for share, kappa in self.by_share]


def choose_cascade_share(first: Sequence[Any], truth: Sequence[Any], second: Sequence[Any],
                         shares: Sequence[float] = SHARES, tolerance: float = 0.01) -> CascadeChoice:
    """The cascade share for these texts, from their coded sample.

    ``first``: the first model's annotations of every text (or the data frame annotate() returned); ``truth``: the
    human codes, None where a text is not coded; ``second``: the second model's annotations of the coded texts, in
    their order (``annotate([texts[i] for i in coded], ..., model=second_model)``). Every share in ``shares`` is
    tried; the smallest whose kappa is within ``tolerance`` of the best is chosen."""
    first = check_annotations(first, "first")
    truth = column_values(truth, "truth", "human codes, one per text (None where not coded)")
    if len(truth) != len(first):
        raise InvalidArgumentError(f"truth has {len(truth)} codes for {len(first)} annotations")
    coded = [i for i, t in enumerate(truth) if not missing(t)]
    second = check_annotations(second, "second")
    if len(second) != len(coded):
        raise InvalidArgumentError(f"second has {len(second)} annotations for the {len(coded)} coded texts: label the "
                                   "coded texts, in their order, with the second model")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise InvalidArgumentError(f"tolerance must be a number in [0, 1), got {tolerance!r}")
    checked = sorted({_share(s) for s in shares})
    by_position = dict(zip(coded, second))
    both = [i for i in coded if first[i].label is not None and by_position[i].label is not None]
    if len(both) < 2:
        raise InvalidArgumentError(f"{len(both)} coded texts labelled by both models: code and label at least 2")
    codes = [truth[i] for i in both]

    def kappa(labels: List[str]) -> float:
        return validate(labels, codes).kappa

    tried: List[Tuple[float, float]] = []
    for share in checked:
        sent = set(least_sure(first, share, None))
        tried.append((share, kappa([(by_position[i] if i in sent else first[i]).label for i in both])))
    best = max(k for _, k in tried)
    chosen = min(s for s, k in tried if k >= best - tolerance)
    return CascadeChoice(chosen, float(tolerance), kappa([first[i].label for i in both]), tuple(tried), len(both))


def _share(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InvalidArgumentError(f"each share must be a number in (0, 1], got {value!r}")
    return float(value)
