"""A context sized for the prompts of one call (sized_context, sequence_budget), and the one-call generate_parallel
that makes a model and such a context."""
from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence, Union

from .context import Context, _positive_int
from ...errors import InvalidArgumentError
from ..llama.model import Model
from ..sampling.params import SamplingParams
from .parallel import Prompt, check_prompts
from ..step.results import Completion
from ..step.progress import Progress

# The sequences of a context sized for one call, unless n_seq_max is given: more prompts per step make more
# tokens per second, but each sequence holds KV cells for the longest prompt and its answer
# (bench/bench_parallel.py measures throughput by number of prompts: docs/benchmarks.md, "Parallel generation").
_DEFAULT_MAX_SEQ = 16
# A huge max_tokens must not size a KV cache of gigabytes: answers then end at the sequence's share.
_MAX_CELLS = 65536


def _n_tokens(model: Model, prompt: Prompt, index: int) -> int:
    if prompt is None:
        raise InvalidArgumentError(f"prompts[{index}] is None; every prompt must be a str")
    return len(model.tokenize(prompt)) if isinstance(prompt, (str, bytes)) else len(prompt)


def _sequences(n_prompts: int, n_seq_max: Optional[int]) -> int:
    return _positive_int("n_seq_max", n_seq_max) if n_seq_max is not None else min(_DEFAULT_MAX_SEQ, max(n_prompts, 1))


def sequence_budget(model: Model, n_prompts: int, n_seq_max: Optional[int] = None, n_ctx: Optional[int] = None) -> int:
    """The most cells a context sized for ``n_prompts`` prompts gives each sequence without growing past its budget:
    ``n_ctx`` shared by the sequences where given, else the model's training context within _MAX_CELLS in all."""
    n_seq = _sequences(n_prompts, n_seq_max)
    if n_ctx is not None:
        return _positive_int("n_ctx", n_ctx) // n_seq
    return min(model.n_ctx_train, _MAX_CELLS // n_seq)


def sized_context(model: Model, prompts: Sequence[Prompt], answer_tokens: int, n_seq_max: Optional[int] = None,
                  **settings: Any) -> Context:
    """A context on ``model`` whose sequences fit the longest prompt and ``answer_tokens`` more;
    ``settings`` (``n_threads``, ``n_ctx`` ...) override what is derived."""
    longest = max((_n_tokens(model, p, i) for i, p in enumerate(prompts)), default=0)
    n_seq = _sequences(len(prompts), n_seq_max)
    room = max(sequence_budget(model, len(prompts), n_seq), longest + 1)
    per_seq = min(longest + answer_tokens + 1, room)
    return Context(model, **{"n_ctx": max(per_seq, 16) * n_seq, "n_seq_max": n_seq, **settings})


def generate_parallel(prompts: Sequence[Prompt], model: Union[Model, str, os.PathLike, None] = None, *,
                      progress: Progress = None, n_seq_max: Optional[int] = None, **sampling: Any) -> List[Completion]:
    """Answers to ``prompts`` in input order.

    ``model`` is a Model, a GGUF path, or None for the embedded model; the other
    keywords are SamplingParams fields (``max_tokens``, ``temperature``, ``stop`` ...).
    The context is sized so that the longest prompt and its answer fit in one sequence.
    """
    prompts = check_prompts(prompts)
    params = SamplingParams(**sampling)
    own_model = not isinstance(model, Model)
    use = Model(model) if own_model else model
    try:
        if not prompts:
            return []
        with sized_context(use, prompts, params.max_tokens, n_seq_max) as ctx:
            return ctx.generate_parallel(prompts, params, progress=progress)
    finally:
        if own_model:
            use.close()
