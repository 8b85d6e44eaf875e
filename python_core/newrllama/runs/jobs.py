"""What a recorded run (on a Context or a Cluster) does with its prompts: the two kinds of job
(generation, annotation), each knowing how to hand a group of its prompts to a worker or a
context, and how its results become lines of the output file and come back from them."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Hashable, List, Optional, Sequence, Tuple, Union

from .annotation import Annotation
from .codebook import check_codebook
from .errors import InvalidArgumentError
from .provenance import PROMPT_LAYOUT, Provenance
from .params import SamplingParams
from .parallel import ParamsArg, check_prompt_kind, check_prompts, normalize_params
from .results import Completion

MAX_ID_LENGTH = 1024


def check_ids(ids: object, n: int) -> Optional[List[Hashable]]:
    """The caller's ids of the prompts (str or int, distinct), which name them in the output file."""
    if ids is None:
        return None
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise InvalidArgumentError("ids must be a list with one str or int per prompt")
    out = list(ids)
    if len(out) != n:
        raise InvalidArgumentError(f"ids has {len(out)} entries for {n} prompts; give one per prompt")
    for i, x in enumerate(out):
        if isinstance(x, bool) or not isinstance(x, (str, int)) or (isinstance(x, str) and not 0 < len(x) <= MAX_ID_LENGTH):
            raise InvalidArgumentError(f"ids[{i}] must be a non-empty str (at most {MAX_ID_LENGTH} characters) "
                                       f"or an int, got {x!r}")
    if len(set(out)) != n:
        dup = next(x for x in out if out.count(x) > 1)
        raise InvalidArgumentError(f"ids holds {dup!r} more than once; every prompt needs its own id")
    return out


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _params_fields(p: SamplingParams) -> dict:
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.init}


class GenerationJob:
    """generate_parallel over the cluster: chunks of prompts with their parameters."""

    method = "generate_parallel"

    def __init__(self, prompts: object, params: ParamsArg) -> None:
        self.prompts = list(check_prompts(prompts))
        checked = [check_prompt_kind(p, i) for i, p in enumerate(self.prompts)]
        self.params = normalize_params(params, len(self.prompts))
        fields = {id(p): _params_fields(p) for p in self.params}
        self.digests = [_digest(c.decode("utf-8", "surrogateescape") if isinstance(c, bytes) else c, fields[id(p)])
                        for c, p in zip(checked, self.params)]

    def __len__(self) -> int:
        return len(self.prompts)

    def payload(self, indices: Sequence[int]) -> Tuple[Any, ...]:
        params = [self.params[i] for i in indices]
        one = bool(params) and all(p is params[0] for p in params)
        return [self.prompts[i] for i in indices], params[0] if one else params

    def record(self, result: Completion) -> dict:
        out = {"text": result.text, "finish_reason": result.finish_reason, "error": result.error,
               "n_prompt_tokens": result.n_prompt_tokens, "n_gen_tokens": result.n_gen_tokens,
               "n_cached_tokens": result.n_cached_tokens}
        if result.choice_probs is not None:
            out["choice_probs"] = result.choice_probs
        if result.engine_error:
            out["engine_error"] = True
        return out

    def from_record(self, record: dict) -> Completion:
        # The file keeps token counts, not token ids: a resumed prompt's token_ids are empty.
        return Completion(record["text"], [], record["finish_reason"], record.get("error"),
                          record.get("n_prompt_tokens", 0), record.get("n_gen_tokens", 0),
                          record.get("n_cached_tokens", 0), record.get("choice_probs"),
                          bool(record.get("engine_error", False)))

    def failed(self, message: str) -> Completion:
        """A prompt the cluster could not run (its worker died, the run stopped): the engine's failure."""
        return Completion("", finish_reason="error", error=message, engine_error=True)

    def has_error(self, result: Completion) -> bool:
        return result.error is not None


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
        self.digests = [_digest(t, label_set, instruction, digestible) for t in self.texts]

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


Job = Union[GenerationJob, AnnotationJob]
