"""The table annotate() gives (its own, ``Annotations.to_pandas()``, or the caller's data frame with the labels' columns
added by ``annotate(df, column=...)``) read back as the annotations it holds, so that every estimator takes the frame
as it takes the list; and a result of annotations given back in the frame it came from."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ..columns import column_values
from ..errors import InvalidArgumentError
from ..frames import is_data_frame, with_columns
from .agreement import missing
from .annotation import Annotation
from .annotations import ANNOTATION_COLUMN_PREFIX, Annotations
from .provenance import Provenance

PROB = "prob_"


def frame_prefix(frame: Any) -> str:
    """The prefix of the frame's annotation columns: "." where annotate(df, column=) added them, "" in the table of
    ``Annotations.to_pandas()``; refused, with what to do, where it holds none (a codebook's, one per question)."""
    names = [str(c) for c in frame.columns]
    for prefix in (ANNOTATION_COLUMN_PREFIX, ""):
        if f"{prefix}label" in names:
            return prefix
    questions = [n[len(ANNOTATION_COLUMN_PREFIX):-len("_label")] for n in names
                 if n.startswith(ANNOTATION_COLUMN_PREFIX) and n.endswith("_label")]
    if questions:
        raise InvalidArgumentError(f"the data frame holds the labels of several questions ({', '.join(questions)}): "
                                   "estimate one question at a time, from its annotations ([r[question] for r in "
                                   "results]) or from a frame of its own columns")
    raise InvalidArgumentError(f"the data frame has no column of labels (.label, as annotate(df, column=...) adds); "
                               f"its columns: {', '.join(names)}")


def annotations_of_frame(frame: Any, refit: bool = False) -> Annotations:
    """The annotations the frame's columns hold: label, each label's probability, error, order flip, tokens cut and
    provenance. ``refit``: the caller calibrates, which needs the model's own probabilities; a frame of calibrated
    labels holds only the calibrated ones and is refused."""
    prefix = frame_prefix(frame)
    names = [str(c) for c in frame.columns]

    def column(name: str) -> Optional[List[Any]]:
        return column_values(frame[prefix + name], prefix + name, "values") if prefix + name in names else None

    labels = [n[len(prefix + PROB):] for n in names if n.startswith(prefix + PROB)]
    if not labels:
        raise InvalidArgumentError(f"the data frame has {prefix}label but no {prefix}{PROB}<label> columns: the "
                                   "estimates need each label's probability, as annotate() gives them")
    chosen = column("label")
    probs = {label: column(PROB + label) for label in labels}
    n = len(chosen)
    missing_as_none = [None] * n
    errors, flips = column("error") or missing_as_none, column("order_flip") or missing_as_none
    cut, sources = column("tokens_cut") or [0] * n, column("provenance") or missing_as_none
    calibrated = column("calibrated") or [False] * n
    if refit and any(not missing(c) and bool(c) for c in calibrated):
        raise InvalidArgumentError("the data frame holds calibrated probabilities, not the model's own, which a "
                                   "calibration is fitted on and applied to: calibrate the annotations annotate() "
                                   "returned (or a frame of uncalibrated labels)")
    read: Dict[str, Provenance] = {}
    out = []
    for i in range(n):
        label = chosen[i] if not missing(chosen[i]) else None
        row = {lab: float(probs[lab][i]) for lab in labels if not missing(probs[lab][i])} if label is not None else None
        source = sources[i]
        if not missing(source) and source not in read:
            read[source] = Provenance.from_dict(json.loads(source))
        out.append(Annotation(label, row or None, error=errors[i] if not missing(errors[i]) else None,
                              order_flip=bool(flips[i]) if not missing(flips[i]) else None,
                              provenance=read.get(source) if not missing(source) else None,
                              tokens_cut=int(cut[i]) if not missing(cut[i]) else 0))
    return Annotations(out)


def as_annotations(annotations: Any, refit: bool = False) -> Any:
    """The annotations of a frame (annotations_of_frame()), anything else as given."""
    return annotations_of_frame(annotations, refit) if is_data_frame(annotations) else annotations


def like_given(given: Any, result: Annotations) -> Any:
    """``result`` in the shape ``given`` came in: a data frame has its annotation columns replaced by the result's
    (the caller's other columns kept, row for row); a list stays a plain list."""
    if not is_data_frame(given):
        return list(result)
    prefix = frame_prefix(given)
    if not prefix:
        return result.to_pandas() if hasattr(given, "assign") else result.to_polars()
    ours = [str(c) for c in given.columns if str(c).startswith(prefix)]
    rest = given.drop(columns=ours) if hasattr(given, "assign") else given.drop(ours)
    return with_columns(rest, result, prefix)
