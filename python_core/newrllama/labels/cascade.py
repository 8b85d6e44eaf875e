"""A cascade: a second, larger model labels the texts the first model is least sure of.

Model size is the largest lever on label quality, and the costliest. The first model labels every text; the texts
with the smallest margin between its two most probable labels (a share of them, or those under a threshold) are
labelled again by the second model, whose label and probabilities replace the first's. The rule reads the first
model's output alone, never a human code, so the labels are one fixed function of the texts: estimates from them
and a random coded sample (prevalence(), regression()) stay valid, as they are for any model's labels. Each text's
provenance names the model that labelled it and the cascade (both models and the rule), which methods_text()
reports."""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from ..engine.calls.context import Context
from ..engine.llama.model import Model
from ..errors import InvalidArgumentError
from .annotation import Annotation


@dataclass(frozen=True)
class Cascade:
    """The second model of a cascade and the rule that sends texts to it: ``share`` (the least sure share of the
    labelled texts, by the first model's margin; ties go to the earlier text) or ``threshold`` (every text whose
    margin is below it). ``model`` is a Context on the second model, a Cluster whose workers run it, a Model, or a
    path or recommended name (loaded for the call)."""

    model: Union[Context, Model, str, os.PathLike]
    share: Optional[float] = None
    threshold: Optional[float] = None

    def __post_init__(self) -> None:
        if not (isinstance(self.model, (Context, Model, str, os.PathLike)) or is_cluster(self.model)):
            raise InvalidArgumentError(f"a cascade's model must be a Context, a Cluster, a Model, or a GGUF path or "
                                       f"name, got {type(self.model).__name__}")
        if (self.share is None) == (self.threshold is None):
            raise InvalidArgumentError("a cascade takes share (the least sure share of the texts) or threshold (a "
                                       "margin), one of them")
        for name in ("share", "threshold"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 < value <= 1):
                raise InvalidArgumentError(f"a cascade's {name} must be a number in (0, 1], got {value!r}")

    def rule(self) -> str:
        """The rule in words, for provenance and methods_text()."""
        if self.share is not None:
            return (f"the {100 * self.share:g}% of texts with the smallest margin between the first model's two most "
                    "probable labels")
        return f"every text whose margin between the first model's two most probable labels was below {self.threshold:g}"

    def chosen(self, first: Sequence[Annotation]) -> List[int]:
        """The positions the second model labels, from the first model's annotations alone (failed texts stay)."""
        return least_sure(first, self.share, self.threshold)


def least_sure(first: Sequence[Annotation], share: Optional[float], threshold: Optional[float]) -> List[int]:
    """The labelled texts under ``threshold`` by their margin, or the least sure ``share`` of them (ties to the
    earlier text), in input order."""
    labelled = [i for i, a in enumerate(first) if a.label is not None]
    if threshold is not None:
        return [i for i in labelled if first[i].margin < threshold]
    by_doubt = sorted(labelled, key=lambda i: (first[i].margin, i))
    return sorted(by_doubt[:math.ceil(share * len(labelled) - 1e-9)])


def is_cluster(x: object) -> bool:
    """Whether x is a newrllama Cluster (told by its class, which this module cannot import: the cluster imports
    annotate(), which imports this)."""
    return any(c.__name__ == "Cluster" and c.__module__.startswith("newrllama.") for c in type(x).__mro__)


def combined(first: Sequence[Annotation], second: Sequence[Annotation], chosen: Sequence[int], cascade: Cascade
             ) -> List[Annotation]:
    """The first model's annotations with the chosen texts' replaced by the second model's, every provenance
    carrying the cascade: both models, the rule, and how many texts each labelled."""
    firsts = next((a.provenance for a in first if a.provenance is not None), None)
    seconds = next((a.provenance for a in second if a.provenance is not None), None)
    record: Dict[str, Any] = {
        "first_model_file": firsts.model_file if firsts else None,
        "first_model_sha256": firsts.model_sha256 if firsts else None,
        "second_model_file": seconds.model_file if seconds else None,
        "second_model_sha256": seconds.model_sha256 if seconds else None,
        "share": cascade.share, "threshold": cascade.threshold, "rule": cascade.rule(),
        "n_labelled_first": sum(a.label is not None for a in first), "n_second": len(chosen)}
    out = list(first)
    for i, a in zip(chosen, second):
        out[i] = a
    return [dataclasses.replace(a, provenance=dataclasses.replace(a.provenance, cascade=record))
            if a.provenance is not None else a for a in out]


def check_cascade(cascade: object, task: Any, writes: bool) -> Optional[Cascade]:
    """annotate()'s ``cascade``, checked against the rest of the call before any work."""
    if cascade is None:
        return None
    if not isinstance(cascade, Cascade):
        raise InvalidArgumentError(f"cascade must be a newrllama.Cascade(model, share=...), got "
                                   f"{type(cascade).__name__}")
    if task.questions is not None:
        raise InvalidArgumentError("a cascade labels one question: annotate each question of the codebook on its own")
    if task.calibration is not None:
        raise InvalidArgumentError("a cascade's labels come from two models, which one calibration cannot fit: "
                                   "leave calibration out")
    if writes:
        raise InvalidArgumentError("a cascade does not write an output file: record the first model's run with "
                                   "annotate(..., output=), then annotate the least sure texts with the second model")
    return cascade
