"""Calibrated probabilities to estimate from with the very texts they were calibrated on: cross_fit().

PPI's interval is valid when the predictions do not depend on the coded texts; a calibration fitted on them
does. Cross-prediction (Zrnic and Candes, PNAS 2024) keeps it valid: the coded texts are split into folds,
each coded text gets the calibration fitted on the other folds, and every uncoded text the average of the
folds' calibrations."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Sequence

from ..labels.annotation import check_annotations
from ..labels.annotation_frame import like_given
from ..labels.annotations import Annotations
from ..labels.calibration import calibrate, fold_indices, warn_if_scored_in_one_order
from ..columns import column_values
from ..errors import AnnotationWarning, InvalidArgumentError
from ..labels.agreement import missing


def cross_fit(annotations: Sequence[Any], truth: Sequence[Any], *, folds: int = 5, seed: int = 0,
              penalty: Any = None, balanced: bool = True, criterion: str = "log-loss") -> Any:
    """Annotations calibrated on the coded texts (``truth``: a label, or None where the text is not coded) such
    that no coded text's probabilities depend on its own code: to give prevalence() or regression() calibrated
    probabilities fitted on the same coded sample they estimate from. ``penalty``, ``balanced`` and ``criterion`` as
    in calibrate(), whose ``criterion`` here defaults to "log-loss": the estimators use the probabilities, and a
    calibration that predicts them better narrows the intervals even where it changes no label. ``folds`` splits
    the coded texts (drawn with ``seed``). Given the data frame annotate() returned, the frame with its labels'
    columns calibrated."""
    given, annotations = annotations, check_annotations(annotations, "annotations", refit=True)
    truth = column_values(truth, "truth", "labels (or None), one per annotation")
    if len(truth) != len(annotations):
        raise InvalidArgumentError(f"truth has {len(truth)} labels for {len(annotations)} annotations: give one label "
                                   "(or None) per annotation")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidArgumentError(f"folds must be an int of at least 2, got {folds!r}")
    coded = [i for i, (a, t) in enumerate(zip(annotations, truth)) if a.label is not None and not missing(t)]
    if len(coded) < 2 * folds:
        raise InvalidArgumentError(f"{len(coded)} coded texts for {folds} folds: cross-fitting needs at least "
                                   f"{2 * folds}")
    warn_if_scored_in_one_order([annotations[i] for i in coded], stacklevel=2)
    fits = []
    with warnings.catch_warnings():  # said once above, not once per fold
        warnings.simplefilter("ignore", AnnotationWarning)
        for part in fold_indices(len(coded), folds, seed):
            held = {coded[k] for k in part}
            others = [None if i in held else t for i, t in enumerate(truth)]
            fits.append((held, calibrate(annotations, others, penalty=penalty, balanced=balanced, folds=folds,
                                         seed=seed, criterion=criterion)))
    out = []
    for i, a in enumerate(annotations):
        if a.label is None:
            out.append(a)
            continue
        own = [cal for held, cal in fits if i in held]
        if own:
            out.append(own[0].apply([a])[0])
            continue
        each = [cal.apply([a])[0] for _, cal in fits]
        probs = {label: sum(e.probs[label] for e in each) / len(each) for label in each[0].probs}
        out.append(dataclasses.replace(a, label=max(probs, key=probs.get), probs=probs,
                                       order_free_probs=each[0].order_free_probs))
    return like_given(given, Annotations(out))
