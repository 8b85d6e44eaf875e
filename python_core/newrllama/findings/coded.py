"""Annotations and human codes as the arrays the estimators take: the predictions for every text, the truth
where a text was coded."""
from __future__ import annotations

from dataclasses import dataclass
import warnings
from collections import Counter
from typing import Any, List, Sequence, Tuple

import numpy as np

from ..labels.agreement import missing
from ..columns import column_values
from ..frames import is_data_frame
from ..labels.annotation import Annotation, check_annotations, probability_margin
from ..errors import FailedTextsWarning, InvalidArgumentError


@dataclass(frozen=True)
class CodedTexts:
    """The texts whose annotation succeeded (``kept``: their positions among the ``n_given``)."""

    labels: List[str]
    predictions: np.ndarray  # texts x labels: each label's probability, or 1 for the model's label
    predicted: np.ndarray  # the model's label, as an index into labels
    model_predicted: np.ndarray  # the label the model's own probabilities favour, before any calibration
    model_margins: np.ndarray  # the margin between the model's own two most probable labels
    truth: np.ndarray  # the human code as an index into labels, -1 where the text was not coded
    kept: np.ndarray
    n_given: int
    failed_errors: Tuple[str, ...] = ()  # why each failed text failed, in order
    failed_coded: int = 0  # failed texts that had a human code: the code is lost with the text

    @property
    def n(self) -> int:
        return len(self.predicted)

    @property
    def n_failed(self) -> int:
        return self.n_given - self.n

    @property
    def coded(self) -> np.ndarray:
        return self.truth >= 0

    def truth_is(self, label: str) -> np.ndarray:
        return (self.truth == self.labels.index(label)).astype(float)


def coded_texts(annotations: Sequence[Any], truth: Sequence[Any], predictions: str) -> CodedTexts:
    if isinstance(truth, (str, bytes)) or not hasattr(truth, "__len__"):
        raise InvalidArgumentError("truth must be a list with one human code per annotation (None where not coded)")
    truth = column_values(truth, "truth", "human codes, one per annotation (None where not coded)")
    if predictions == "labels" and not is_data_frame(annotations):
        annotations = _labels_alone(annotations, truth)
    annotations = check_annotations(annotations, "annotations")
    if len(truth) != len(annotations):
        raise InvalidArgumentError(f"truth has {len(truth)} codes but there are {len(annotations)} annotations")
    kept = [i for i, a in enumerate(annotations) if a.label is not None and a.probs]
    if not kept:
        raise InvalidArgumentError("no annotation has a label: every text failed")
    labels = list(annotations[kept[0]].probs)
    for i in kept:
        if list(annotations[i].probs) != labels:
            raise InvalidArgumentError(f"annotations[{i}] has other labels than annotations[{kept[0]}]: "
                                       "estimate from one annotate() call's labels")
    unknown = sorted({str(t) for t in truth if not missing(t) and t not in labels})
    if unknown:
        raise InvalidArgumentError(f"truth holds {', '.join(map(repr, unknown))}, not among the labels {labels}")
    predicted = np.array([labels.index(annotations[i].label) for i in kept])
    if predictions == "probs":
        scores = np.array([[annotations[i].probs[label] for label in labels] for i in kept], dtype=float)
    else:
        scores = np.eye(len(labels))[predicted]
    codes = np.array([-1 if missing(truth[i]) else labels.index(truth[i]) for i in kept])
    # Calibration refits probabilities on the coded texts (cross_fit() each coded text out of its own fold,
    # the others by every fold's fit): what tells coded texts from random ones is the model's own output.
    own = [annotations[i].order_free_probs or annotations[i].probs for i in kept]
    model_predicted = np.array([labels.index(max(p, key=p.get)) for p in own])
    model_margins = np.array([probability_margin(p) for p in own], dtype=float)
    labelled = set(kept)
    failed = [i for i in range(len(annotations)) if i not in labelled]
    return CodedTexts(labels, scores, predicted, model_predicted, model_margins, codes, np.array(kept),
                      len(annotations), tuple(annotations[i].error or "no label" for i in failed),
                      sum(not missing(truth[i]) for i in failed))


def _labels_alone(annotations: Any, truth: Sequence[Any]) -> Any:
    """Plain labels (None where a text has none), as predictions="labels" takes them, as annotations whose label has
    probability 1; the labels are those given and coded, in sorted order. Annotations stay as they are."""
    values = column_values(annotations, "annotations", "Annotation or labels")
    if not values or not all(v is None or isinstance(v, str) for v in values):
        return values
    labels = sorted({v for v in values if v is not None} | {t for t in truth if not missing(t)})
    return [Annotation(None, error="no label") if v is None else Annotation(v, {x: float(x == v) for x in labels})
            for v in values]


def warn_if_failed(data: CodedTexts, what: str) -> None:
    """Warns (FailedTextsWarning) when texts without a label are left out of an estimate: it is then of the labelled
    texts alone, a narrower population than the texts given, whatever the coded sample."""
    if not data.n_failed:
        return
    reasons = Counter(data.failed_errors).most_common()
    said = "; ".join(f"{n}: {why}" for why, n in reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
    coded = f", {data.failed_coded} of them coded (their codes are lost with them)" if data.failed_coded else ""
    warnings.warn(f"{what}: {data.n_failed} of {data.n_given} texts have no label and are left out ({said}){coded}: "
                  f"the estimate is of the {data.n} labelled texts, not of all {data.n_given}. Label them "
                  "(annotate(..., too_long=\"truncate\"), or a context that holds them: plan_annotation() lists the "
                  "texts that do not fit) or report the narrower population (methods_text() states it)",
                  FailedTextsWarning, stacklevel=3)

