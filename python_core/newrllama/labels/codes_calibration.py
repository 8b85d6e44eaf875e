"""Labels calibrated on the human codes given to annotate() (``calibration=codes``): every text is scored in two
orders, as for calibration="pending", and once all are labelled the coded ones fit a calibrate() that is applied to
all. It is what scoring with "pending", calibrate() on the coded texts and Calibration.apply() give, in one call: the
flow of a researcher who codes a sample after a first, uncalibrated run (labels scored in one order calibrate worse;
calibrate() says so)."""
from __future__ import annotations

import warnings
from typing import Any, List

from ..errors import AnnotationWarning, InvalidArgumentError
from .annotation_task import AnnotationTask
from .calibration import calibrate


def calibrated_by_codes(results: List[Any], task: AnnotationTask, stacklevel: int = 3) -> List[Any]:
    """``results`` (one per text: an Annotation, or with a codebook a dict question -> Annotation) with each question
    that has human codes calibrated on them."""
    if not task.codes:
        return results
    out = [dict(r) if task.questions is not None else {None: r} for r in results]
    for q, codes in task.codes.items():
        labelled = [r[q] for r in out]
        try:
            cal = calibrate(labelled, codes)
        except InvalidArgumentError as exc:  # every coded text failed: the work is kept, uncalibrated
            where = "" if q is None else f"question {q!r}: "
            warnings.warn(f"{where}the labels are not calibrated ({exc})", AnnotationWarning, stacklevel=stacklevel)
            continue
        for r, a in zip(out, cal.apply(labelled)):
            r[q] = a
    return out if task.questions is not None else [r[None] for r in out]
