"""An annotation (the label of one text, with every label's probability) and the checks of annotate()'s
arguments that need no model: shared by annotate(), the results file's jobs and calibration."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .codebook import check_codebook
from ..columns import column_values
from ..errors import InvalidArgumentError
from ..frames import is_data_frame
from .provenance import Provenance


@dataclass(frozen=True)
class Annotation:
    """The label chosen for one text (None if it failed), every label's probability, and why it failed.

    ``probs`` are the ones the label was chosen by: order-free, and calibrated when a
    calibration was applied. ``raw_probs`` are the model's, with the labels listed in one
    order (sorted; as given with debias="none"); ``order_free_probs`` the order-free ones before any calibration.
    ``order_flip``: whether the label the model preferred changed between the listing orders it scored the text
    in (None where it scored one order): a text whose label rests on where the labels stand. ``provenance``: what
    produced the call's labels (model, codebook, debias method, determinism, release); left out of comparisons.
    ``tokens_cut``: how many of the text's tokens were cut to fit a sequence (annotate()'s ``too_long``; 0 where the
    model read the whole text)."""

    label: Optional[str]
    probs: Optional[Dict[str, float]] = None
    error: Optional[str] = None
    raw_probs: Optional[Dict[str, float]] = None
    order_free_probs: Optional[Dict[str, float]] = None
    order_flip: Optional[bool] = None
    provenance: Optional[Provenance] = field(default=None, compare=False, repr=False)
    tokens_cut: int = 0

    @property
    def margin(self) -> Optional[float]:
        """The top probability minus the second (small: the model hesitates); None for a failed text."""
        return probability_margin(self.probs) if self.probs else None


def probability_margin(probs: Dict[str, float]) -> float:
    """The top probability minus the second."""
    top = sorted(probs.values(), reverse=True)
    return top[0] - top[1]


# What makes a call's labels suspect (annotate() warns): one label for at least COLLAPSED of at least
# MIN_TEXTS texts, or a label that changes with the listing order on at least FLIPPED of the texts scored in
# several orders.
MIN_TEXTS = 20
COLLAPSED = 0.95
FLIPPED = 0.10


def suspect_labels(annotations: Sequence["Annotation"]) -> List[str]:
    """What looks wrong with a call's labels as a whole, in words (empty if nothing does)."""
    labelled = [a for a in annotations if a.label is not None]
    out = []
    if len(labelled) >= MIN_TEXTS and len(labelled[0].probs or {}) > 1:
        top, n = max(Counter(a.label for a in labelled).items(), key=lambda kv: kv[1])
        if n >= COLLAPSED * len(labelled):
            out.append(f"{n} of {len(labelled)} texts got the label {top!r}: the model may not be telling the labels "
                       "apart (check the instruction and the definitions; validate() on a coded sample tells)")
    scored = [a for a in labelled if a.order_flip is not None]
    flips = sum(a.order_flip for a in scored)
    if len(scored) >= MIN_TEXTS and flips >= FLIPPED * len(scored):
        out.append(f"the label changed with the listing order on {flips} of {len(scored)} texts (Annotation.order_flip): "
                   "those labels rest on where the labels stand in the list")
    return out


def check_annotations(annotations: object, name: str, refit: bool = False) -> List[Annotation]:
    """A list of Annotation from a list, or from the table annotate() gave (annotation_frame.py; ``refit``: for a
    calibration, which refuses a frame of calibrated probabilities)."""
    if is_data_frame(annotations):
        from .annotation_frame import annotations_of_frame  # it builds Annotations: imported here, not at the top
        return list(annotations_of_frame(annotations, refit))
    if isinstance(annotations, (str, bytes)) or not isinstance(annotations, Sequence):
        raise InvalidArgumentError(f"{name} must be a list of Annotation, or the data frame annotate() returned")
    out = list(annotations)
    for i, a in enumerate(out):
        if not isinstance(a, Annotation):
            raise InvalidArgumentError(f"{name}[{i}] must be an Annotation, got {type(a).__name__}")
    return out


class PickedPositions(list):
    """Positions of texts chosen by the model's doubt, not drawn: a coding sheet of them records that they were
    picked (``how``), so that estimates refuse their codes."""

    how = "by the model's doubt, the least confident labels (least_confident())"


def least_confident(annotations: Sequence[Annotation], n: int) -> PickedPositions:
    """Positions of the n labelled texts with the smallest margin, the least sure first: the ones to code by hand
    for calibration. Their codes cannot estimate shares (they are not a random sample): write_coding_sheet()
    records that beside the sheet, and read_coding_sheet() passes it on to the estimates, which refuse them."""
    annotations = check_annotations(annotations, "annotations")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidArgumentError(f"n must be a non-negative int, got {n!r}")
    labelled = [i for i, a in enumerate(annotations) if a.label is not None]
    return PickedPositions(sorted(labelled, key=lambda i: (annotations[i].margin, i))[:n])


def check_texts(texts: object) -> List[Any]:
    return column_values(texts, "texts", "str")


def check_annotate_args(texts: object, labels: object, instruction: object) -> Tuple[List[Any], Tuple[str, ...]]:
    """The texts as a list and the checked labels; raises for arguments of the wrong kind."""
    return check_texts(texts), check_codebook(labels, instruction).labels
