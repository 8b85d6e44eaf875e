"""plan_annotation(): what an annotate() call will take, before it runs: every text's tokens and its longest
prompt as it will run, the texts that do not fit a sequence whole (cut or failing, by ``too_long``), the context
(its size and the memory it took here) and a time estimate from a short timed sample of the texts on this machine."""
from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Union

from .annotate import MISSING, label_texts, model_of
from .annotation import check_texts
from .annotation_options import TASK_OPTIONS, options_of
from .annotation_task import AnnotationTask, Labels
from .cascade import Cascade, check_cascade
from ..engine.calls.context import Context
from ..engine.calls.sized_context import sized_context
from ..engine.llama.model import Model
from ..errors import AnnotationWarning, InvalidArgumentError
from ..frames import Tabular
from .prepared_call import answer_room, call_prompts, prepare_call, tokens_cut_of

DEFAULT_SAMPLE = 8


@dataclass(frozen=True)
class AnnotationPlan(Tabular):
    """Per text (in input order): ``text_tokens`` (None where the text is missing), ``prompt_tokens`` (its longest
    prompt as it will run, after any cut; None where it will not run), ``tokens_cut`` and ``errors`` (why a text
    will fail before any prompt runs: missing, or too long with too_long="error"). For the call: ``too_long``,
    ``n_prompts``, the context (``n_ctx``, ``n_seq_max``), ``model_bytes`` (the model file), ``context_bytes``
    (the memory the context took when the plan made it, read from the process's resident size; None for a context
    given, or where the system does not say), the ``sample`` of texts labelled and its ``sample_seconds``, and
    ``seconds``: the whole call's estimate, the sample's time scaled by the tokens each text adds to the shared
    start of the prompts (None without a sample); ``sample_margins`` the margins of the sample's labels (one question).
    With a cascade, ``seconds`` is both stages' and
    ``second_seconds`` the second model's part: its own timed sample scaled to the texts the rule sends on
    (``second_share``: the cascade's share, or with a threshold the share of the first stage's sample under it)."""

    text_tokens: List[Optional[int]]
    prompt_tokens: List[Optional[int]]
    tokens_cut: List[int]
    errors: List[Optional[str]]
    too_long: str
    n_prompts: int
    n_ctx: int
    n_seq_max: int
    model_bytes: int
    context_bytes: Optional[int]
    sample: List[int]
    sample_seconds: float
    seconds: Optional[float]
    sample_margins: List[float] = field(default_factory=list)
    second_seconds: Optional[float] = None
    second_share: Optional[float] = None

    @property
    def n_texts(self) -> int:
        return len(self.text_tokens)

    @property
    def too_long_texts(self) -> List[int]:
        """Positions of the texts that do not fit a sequence whole: cut, or failing for their length."""
        return [i for i, (cut, error) in enumerate(zip(self.tokens_cut, self.errors))
                if cut or (error is not None and error != MISSING)]

    def cascade_share_for(self, seconds: float) -> float:
        """The largest cascade share whose whole run this plan (made with a cascade) expects within ``seconds``: 0
        where the first model alone takes longer, 1 where every text fits."""
        if self.second_seconds is None or not self.second_share or self.seconds is None:
            raise InvalidArgumentError("this plan has no cascade's second stage to size: plan with cascade=")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise InvalidArgumentError(f"seconds must be a positive number, got {seconds!r}")
        first = self.seconds - self.second_seconds
        every_text = self.second_seconds / self.second_share
        return min(1.0, max(0.0, (seconds - first) / every_text))

    def rows(self) -> List[Dict[str, Any]]:
        return [{"text_tokens": t, "prompt_tokens": p, "tokens_cut": c, "error": e}
                for t, p, c, e in zip(self.text_tokens, self.prompt_tokens, self.tokens_cut, self.errors)]

    def __str__(self) -> str:
        known = [t for t in self.text_tokens if t is not None]
        longest = max(known, default=0)
        long = self.too_long_texts
        what = ("fail (too_long='error')" if self.too_long == "error" else f"be cut ({self.too_long})")
        memory = (f"model {_megabytes(self.model_bytes)}" +
                  (f" + context {_megabytes(self.context_bytes)}" if self.context_bytes is not None else ""))
        timed = f"{len(self.sample)} text" + ("s" if len(self.sample) != 1 else "")
        time_line = (f"about {_duration(self.seconds)} (from {timed} labelled in "
                     f"{self.sample_seconds:.1f} s here)" if self.seconds is not None else "not estimated (no sample)")
        if self.second_seconds is not None:
            time_line += (f", of which the cascade's second model about {_duration(self.second_seconds)} for "
                          f"{100 * self.second_share:.0f}% of the texts")
        return "\n".join([
            f"{self.n_texts} texts, {sum(known):,} tokens (longest {longest:,}), {self.n_prompts} prompts",
            f"context: n_ctx {self.n_ctx:,}, n_seq_max {self.n_seq_max} ({self.n_ctx // self.n_seq_max:,} cells a "
            "sequence)",
            f"texts that do not fit a sequence whole: {len(long)}, which will {what}" if long
            else "every text fits a sequence",
            f"memory: {memory}",
            f"time: {time_line}",
        ])


def plan_annotation(texts: Sequence[Optional[str]], labels: Union[AnnotationTask, Labels, None] = None,
                    instruction: str = "", *, context: Optional[Context] = None,
                    model: Union[Model, str, os.PathLike, None] = None, sample: int = DEFAULT_SAMPLE,
                    cascade: Optional[Cascade] = None, **options: Any) -> AnnotationPlan:
    """What ``annotate(texts, labels, instruction, ...)`` will take, measured before it runs (see AnnotationPlan).
    ``options`` are annotate()'s (``definitions``, ``debias``, ``too_long`` ...) and, without a ``context``, the
    settings of the context it would make (``n_seq_max``, ``n_ctx``, ``n_threads``); the plan makes that context
    and labels ``sample`` texts on it (spread over the input; 0 for none) to time them. With a ``cascade``, the
    same sample is timed on its model too, and the second stage's time estimated for the texts its rule sends on."""
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise InvalidArgumentError(f"sample must be a non-negative int, got {sample!r}")
    task = AnnotationTask.of(labels, instruction, **options_of("task", options))
    context_kwargs = {k: v for k, v in options.items() if k not in TASK_OPTIONS}
    texts = check_texts(texts)
    if check_cascade(cascade, task, False) is not None:
        first = plan_annotation(texts, task, context=context, model=model, sample=sample, **context_kwargs)
        second_context = cascade.model if isinstance(cascade.model, Context) else None
        second_model = None if second_context is not None else cascade.model
        second = plan_annotation(texts, task, context=second_context, model=second_model, sample=sample,
                                 **({} if second_context is not None else context_kwargs))
        under = [m < cascade.threshold for m in first.sample_margins] if cascade.threshold is not None else []
        share = cascade.share if cascade.share is not None else (sum(under) / len(under) if under else None)
        if first.seconds is None or second.seconds is None or share is None:
            return first
        return replace(first, seconds=first.seconds + share * second.seconds, second_seconds=share * second.seconds,
                       second_share=share)
    with model_of(context, model) as use:
        call = prepare_call(use, texts, task, context, context_kwargs)
        prompts = call_prompts(use, task, call)
        tokens = [t for t in (call.tokens[p] for p in prompts) if not isinstance(t, str)]  # those that can run
        text_tokens = [len(use.tokenize(t, add_special=False)) if isinstance(t, str) and t.strip() else None
                       for t in texts]
        longest: Dict[int, int] = {}
        for (_, i, _), prompt in zip(call.jobs, prompts):
            longest[i] = max(longest.get(i, 0), call.tokens.length(prompt))
        errors = [call.failed.get(i, MISSING if text_tokens[i] is None else None) for i in range(len(texts))]
        chosen = _spread(call.runnable, sample)
        before = _resident_bytes()
        ctx = context if context is not None else sized_context(use, tokens, answer_room(use, task.books),
                                                                **context_kwargs)
        grown = _resident_bytes()
        try:
            t0 = time.perf_counter()
            done: List[Any] = []
            if chosen:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", AnnotationWarning)
                    done = label_texts([texts[i] for i in chosen], task, context=ctx)
            seconds = time.perf_counter() - t0
            n_ctx, n_seq_max = ctx.n_ctx, ctx.n_seq_max
        finally:
            if ctx is not context:
                ctx.close()
        model_bytes = os.path.getsize(use.identity().path)
    work = _work(call.jobs, [call.tokens[p] for p in prompts[:len(call.jobs)]])
    sampled = sum(work.get(i, 0) for i in chosen)
    return AnnotationPlan(
        text_tokens, [longest.get(i) for i in range(len(texts))], [tokens_cut_of(call.fits.get(i)) for i in range(len(texts))],
        errors, task.too_long, len(prompts), n_ctx, n_seq_max, model_bytes,
        grown - before if context is None and before is not None and grown is not None else None, chosen, seconds,
        seconds * sum(work.values()) / sampled if sampled else None,
        [a.margin for a in done if task.questions is None and a.label is not None])


def _spread(positions: Sequence[int], k: int) -> List[int]:
    """k of the positions, evenly spread from the first to the last (all of them when there are no more than k)."""
    n = len(positions)
    if n <= k:
        return list(positions)
    if k == 1:
        return [positions[0]]
    return sorted({positions[round(j * (n - 1) / (k - 1))] for j in range(k)})


def _work(jobs: Sequence[Any], scored: Sequence[Union[List[int], str]]) -> Dict[int, int]:
    """Each text's tokens beyond the start every prompt shares (the instruction, decoded once per call), summed
    over its prompts (``scored``: each job's tokens, or why it cannot run): what a text adds to a call's time."""
    runs = [t for t in scored if not isinstance(t, str)]
    shared = len(os.path.commonprefix(runs)) if runs else 0
    out: Dict[int, int] = {}
    for (_, i, _), prompt in zip(jobs, scored):
        if not isinstance(prompt, str):
            out[i] = out.get(i, 0) + len(prompt) - shared
    return out


def _resident_bytes() -> Optional[int]:
    """This process's resident memory, where the system says it (Linux's /proc); None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
