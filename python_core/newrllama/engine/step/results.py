"""Results of generation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Literal, Optional

if TYPE_CHECKING:
    from ..llama.reproducibility import Determinism

FinishReason = Literal["stop", "length", "error", "cancelled"]


@dataclass(frozen=True)
class Completion:
    """The answer to one prompt.

    ``finish_reason`` is ``'stop'`` (end-of-generation token or stop string),
    ``'length'`` (``max_tokens`` reached, or the prompt's context was full) or
    ``'error'`` (this prompt could not run; ``error`` says why, ``text`` is empty) or
    ``'cancelled'`` (the caller stopped it: a stream closed early; a call interrupted
    with Ctrl-C raises instead of returning results).

    ``engine_error`` tells whose an error was: True when the engine failed (llama_decode,
    an internal error, the context closed while it ran), so the same prompt may succeed
    when run again; False when the prompt cannot run as given (empty, too long for its
    sequence, tokens outside the vocabulary, a grammar that cannot be completed).
    """

    text: str
    token_ids: List[int] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    error: Optional[str] = None
    n_prompt_tokens: int = 0
    n_gen_tokens: int = 0
    n_cached_tokens: int = 0  # prompt tokens served by the prefix cache (not decoded for this prompt)
    choice_probs: Optional[Dict[str, float]] = None  # with SamplingParams(choices=...): label -> probability
    engine_error: bool = False
    # With choices: label -> log-probability, computed as such (a label far less probable than another has a
    # probability that rounds to 0 and a log-probability that does not).
    choice_logprobs: Optional[Dict[str, float]] = None


@dataclass(frozen=True)
class GenerationStats:
    """Figures of the last generation call on a context."""

    n_prompts: int
    n_prompt_tokens: int
    n_gen_tokens: int
    n_cached_tokens: int
    t_prompt_s: float
    t_gen_s: float
    t_total_s: float
    tokens_per_second: float
    n_decode_calls: int
    n_fallbacks: int
    n_failed: int


@dataclass(frozen=True)
class EngineStats:
    """Figures of a context's scheduler since the context was made."""

    n_steps: int
    t_step_s: float     # inside newrllama_step (decode and sampling, in C)
    t_python_s: float   # the scheduler's own work around the steps
    n_cached_prefixes: int = 0  # prefixes the prefix cache holds now
    n_prefix_evictions: int = 0
    n_running: int = 0          # prompts holding a sequence now
    n_waiting: int = 0          # prompts submitted and waiting for a sequence
    determinism: Optional[Determinism] = None  # what the context's numbers repeat with

    @property
    def python_us_per_step(self) -> float:
        return 1e6 * self.t_python_s / self.n_steps if self.n_steps else 0.0
