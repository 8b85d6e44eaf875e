"""annotate(): one label of a fixed set for every text, with its probabilities.

The prompt puts the instruction and the labels first (in the system turn of the
model's chat template, or plainly when the model has none), then the text: every
prompt of a call starts with the same tokens, which the prefix cache decodes once.
The labels are scored as choices (see SamplingParams), so every answer is valid."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .choices import label_tokens
from .context import Context
from .convenience import sized_context
from .errors import InvalidArgumentError, TemplateError
from .model import Model
from .params import SamplingParams, check_choices
from .results import Completion

DEFAULT_INSTRUCTION = "Classify the text."


@dataclass(frozen=True)
class Annotation:
    """The label chosen for one text (None if it failed), every label's probability, and why it failed."""

    label: Optional[str]
    probs: Optional[Dict[str, float]] = None
    error: Optional[str] = None


def system_text(labels: Sequence[str], instruction: str) -> str:
    return f"{instruction.strip() or DEFAULT_INSTRUCTION}\nAnswer with exactly one of these labels: {', '.join(labels)}."


def annotation_prompt(model: Model, system: str, text: str) -> str:
    try:
        return model.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": text}])
    except TemplateError:  # no chat template: a base model continues plain text
        return f"{system}\n\nText: {text}\nLabel:"


def check_annotate_args(texts: object, labels: object, instruction: object) -> Tuple[List[Any], Tuple[str, ...]]:
    """The texts as a list and the checked labels; raises for arguments of the wrong kind."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidArgumentError("texts must be a list of str")
    checked = check_choices(labels)
    if checked is None:
        raise InvalidArgumentError("labels must be a list of at least 2 labels")
    if not isinstance(instruction, str):
        raise InvalidArgumentError(f"instruction must be a str, got {type(instruction).__name__}")
    return list(texts), checked


def annotate(texts: Sequence[Optional[str]], labels: Sequence[str], instruction: str = "", *,
             context: Optional[Context] = None, model: Union[Model, str, os.PathLike, None] = None,
             progress: bool = False, **context_kwargs: Any) -> List[Annotation]:
    """Labels every text with one of ``labels``, in input order.

    With no ``context``, one is made on ``model`` (a Model, a GGUF path, or None for the
    embedded model), sized for the texts; ``context_kwargs`` (``n_seq_max``, ``n_threads``,
    ``n_ctx`` ...) override its settings. A text that is None or empty gets an Annotation
    with ``error`` set; the others are labelled."""
    texts, labels = check_annotate_args(texts, labels, instruction)
    if context is not None and not isinstance(context, Context):
        raise InvalidArgumentError(f"context must be a newrllama.Context, got {type(context).__name__}")
    own_model = context is None and not isinstance(model, Model)
    use = context.model if context is not None else (Model(model) if own_model else model)
    try:
        runnable, prompts = annotation_prompts(use, texts, labels, instruction)
        completions = _run(use, context, prompts, labels, progress, context_kwargs) if prompts else []
        return annotations(len(texts), runnable, completions)
    finally:
        if own_model:
            use.close()


def annotation_prompts(model: Model, texts: Sequence[Any], labels: Sequence[str],
                       instruction: str) -> Tuple[List[int], List[str]]:
    """The positions of the texts that can be labelled, and their prompts."""
    system = system_text(labels, instruction)
    runnable = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
    return runnable, [annotation_prompt(model, system, texts[i]) for i in runnable]


def annotations(n_texts: int, runnable: Sequence[int], completions: Sequence[Completion]) -> List[Annotation]:
    """One Annotation per text from the completions of its prompt (see annotation_prompts)."""
    results = [Annotation(None, error="text is missing or empty")] * n_texts
    for i, c in zip(runnable, completions):
        results[i] = (Annotation(c.text, c.choice_probs) if c.finish_reason == "stop"
                      else Annotation(None, error=c.error or c.finish_reason))
    return results


def _run(model: Model, context: Optional[Context], prompts: List[str], labels, progress: bool,
         context_kwargs: Dict[str, Any]):
    params = SamplingParams(choices=labels)
    if context is not None:
        return context.generate_parallel(prompts, params, progress=progress)
    longest_label = max(len(t) for t in label_tokens(model.vocab.tokenize, labels, spaced=True)) + 1  # and its end
    with sized_context(model, prompts, longest_label, **context_kwargs) as ctx:
        return ctx.generate_parallel(prompts, params, progress=progress)
