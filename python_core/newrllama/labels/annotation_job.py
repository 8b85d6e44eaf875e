"""annotate() as a recorded run's job (runs/jobs.py): chunks of texts, each labelled with the call's task."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from .annotation import Annotation
from .annotation_task import AnnotationTask
from .provenance import Provenance


class AnnotationJob:
    """annotate over the cluster or in recorded groups: chunks of texts, each labelled by annotate() with the
    call's task (the worker builds the prompts with its model's template). A text's result is an Annotation, or
    with a codebook a dict question -> Annotation."""

    method = "annotate"

    def __init__(self, texts: Sequence[Optional[str]], task: AnnotationTask) -> None:
        self.texts, self.task = list(texts), task
        self.questions = task.questions
        self.digests = task.digests(self.texts)
        self.settings_digests = [task.settings_digest()] * len(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    def payload(self, indices: Sequence[int]) -> Tuple[Any, ...]:
        return [self.texts[i] for i in indices], self.task.scoring()

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


def _annotation_record(result: Annotation) -> dict:
    return {"label": result.label, "probs": result.probs, "error": result.error, "raw_probs": result.raw_probs,
            "order_free_probs": result.order_free_probs, "order_flip": result.order_flip,
            "provenance": result.provenance.to_dict() if result.provenance else None, "tokens_cut": result.tokens_cut}


def _annotation_from_record(record: dict) -> Annotation:
    source = record.get("provenance")
    return Annotation(record["label"], record.get("probs"), record.get("error"), record.get("raw_probs"),
                      record.get("order_free_probs"), record.get("order_flip"),
                      Provenance.from_dict(source) if source else None, record.get("tokens_cut", 0))
