"""annotate() as a recorded run's job (runs/jobs.py): chunks of texts, each labelled with every option of the
call."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from ..runs.jobs import digest
from .annotation import Annotation
from .codebook import check_codebook
from .provenance import PROMPT_LAYOUT, Provenance


class AnnotationJob:
    """annotate over the cluster or in recorded groups: chunks of texts, each labelled by annotate() with every
    option of the call (the worker builds the prompts with its model's template). A text's result is an
    Annotation, or with a codebook a dict question -> Annotation (``questions``)."""

    method = "annotate"

    def __init__(self, texts: Sequence[Any], labels: object, instruction: object, options: dict,
                 questions: Optional[Sequence[str]] = None) -> None:
        self.texts, self.labels, self.instruction, self.options = list(texts), labels, instruction, options
        self.questions = list(questions) if questions is not None else None
        # The prompt layout's version too: a file labelled under another layout is not resumed into this one.
        label_set = check_codebook(labels, instruction).labels if labels is not None else None
        digestible = {**options, "labels": labels, "calibration": _calibration_dicts(options.get("calibration")),
                      "layout": PROMPT_LAYOUT}
        self.digests = [digest(t, label_set, instruction, digestible) for t in self.texts]

    def __len__(self) -> int:
        return len(self.texts)

    def payload(self, indices: Sequence[int]) -> Tuple[Any, ...]:
        return [self.texts[i] for i in indices], self.labels, self.instruction, self.options

    def record(self, result: Any) -> dict:
        if self.questions is None:
            return _annotation_record(result)
        answers = {q: _annotation_record(result[q]) for q in self.questions}
        return {"questions": answers, "error": next((a["error"] for a in answers.values() if a["error"]), None)}

    def from_record(self, record: dict) -> Any:
        if self.questions is None:
            return _annotation_from_record(record)
        return {q: _annotation_from_record(record["questions"][q]) for q in self.questions}

    def failed(self, message: str) -> Any:
        if self.questions is None:
            return Annotation(None, error=message)
        return {q: Annotation(None, error=message) for q in self.questions}

    def has_error(self, result: Any) -> bool:
        return any(a.error is not None for a in (result.values() if self.questions is not None else [result]))


def _calibration_dicts(calibration: Any) -> Any:
    """A calibration (or a dict question -> calibration) as plain data, for a run's digest."""
    if isinstance(calibration, dict):
        return {q: c.to_dict() for q, c in calibration.items()}
    return calibration.to_dict() if calibration is not None else None


def _annotation_record(result: Annotation) -> dict:
    return {"label": result.label, "probs": result.probs, "error": result.error, "raw_probs": result.raw_probs,
            "order_free_probs": result.order_free_probs, "order_flip": result.order_flip,
            "provenance": result.provenance.to_dict() if result.provenance else None}


def _annotation_from_record(record: dict) -> Annotation:
    source = record.get("provenance")
    return Annotation(record["label"], record.get("probs"), record.get("error"), record.get("raw_probs"),
                      record.get("order_free_probs"), record.get("order_flip"),
                      Provenance.from_dict(source) if source else None)
