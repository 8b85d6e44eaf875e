"""A prompt as a client of the scheduler, and the group of prompts one caller submitted.

A Request's tokens are its prompt followed by what it generated, in an int32 array
that steps read from directly (step_assembly.py lends it to C); n_past says how many
of them its sequence holds. Everything here runs per event (one sampled token, one
finished prompt), never per vocabulary entry: sampling happens in C, and this module
does not call it. Its own fields are written by its methods (accept() applies stop strings and max_tokens), its
prefix fields by prompt_prefixes.py, its sequence and sampler by the scheduler, its place in the queue by
policy.py (docs/design/layers.md, "A step")."""
from __future__ import annotations

import enum
import threading
from array import array
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple, Union

from ...errors import ClosedError
from ..sampling.params import SamplingParams
from .results import Completion, FinishReason, GenerationStats
from .choices import ChoiceScoring
from ..kv.prefix_cache import TOKEN_BYTES, TOKEN_TYPECODE
from .progress import Progress, progress_bar
from .stops import StopMatcher

# Called from the engine thread with the bytes a stream may show, and True once at the end.
Sink = Callable[[bytes, bool], None]


class RequestStatus(enum.Enum):
    """Where a request is, derived from its fields (Request.status)."""

    WAITING = "waiting"                  # for a sequence
    AWAITING_PREFIX = "awaiting prefix"  # admitted; the cached prefix it starts from is still being decoded
    PREFILLING = "prefilling"            # its prompt's tokens are being decoded
    GENERATING = "generating"            # one token to decode per step, then one to sample
    SCORING_LABELS = "scoring labels"    # its prompt is decoded; its labels' paths are being scored
    FINISHED = "finished"


class Request:
    __slots__ = ("call", "index", "params", "c_params", "seed", "key", "tokens", "n_prompt", "n_tokens", "n_past", "seq",
                 "sampler", "text", "stops", "n_ctx_seq", "pieces", "sink", "n_shown", "cancelled", "completion",
                 "shared", "runs_ahead", "prefix", "n_copied", "n_cached", "choice", "grammar", "admitted",
                 "arrival", "arrived_step")

    def __init__(self, call: "Call", index: int, prompt_tokens: List[int], key: bytes, params: SamplingParams, c_params,
                 seed: int, n_ctx_seq: int, pieces: Callable[[int], bytes], shared: Tuple[int, ...] = (),
                 choice: Optional[ChoiceScoring] = None, grammar=None) -> None:
        self.call = call
        self.index = index
        self.params = params
        self.c_params = c_params  # the sampling part of params in C, shared by the call's requests with these params
        self.key = key  # prefix_cache.token_key(prompt_tokens)
        self.n_prompt = len(prompt_tokens)
        self.seed = seed  # its sampler's (see samplers.prompt_seed)
        self.tokens: Optional[array] = None
        self.n_tokens = self.n_prompt
        self.n_past = 0
        self.seq = -1
        self.sampler = None  # its C sampler while admitted (None for choices: labels are scored, not sampled)
        self.text = b""
        self.stops = StopMatcher(params.stop) if params.stop else None
        self.n_ctx_seq = n_ctx_seq
        self.pieces = pieces
        self.sink: Optional[Sink] = None
        self.n_shown = 0
        self.cancelled = False
        self.completion: Optional[Completion] = None
        self.shared = shared    # lengths of starts shared with other prompts (shortest first), worth caching
        self.runs_ahead = False  # while it waits: the cache holds (or decodes) a run for each of those starts
        self.prefix = None      # the cached run it copied (n_copied > 0) or waits for (n_copied == 0)
        self.n_copied = 0       # prompt tokens its sequence got from a cached run or a running prompt
        self.n_cached = 0       # of those, the ones no step decoded on its behalf
        self.choice = choice    # with choices: the scoring of its labels, instead of sampling
        self.grammar = grammar  # its parsed grammar (Vocab.parse_grammar), shared by the call's prompts, or None
        self.admitted = -1      # its place in the order the scheduler admitted prompts in
        self.arrival = -1       # its place in the order requests reached the scheduler (policy.WaitingQueue)
        self.arrived_step = 0   # the scheduler's step count then

    def start(self, seq: int, sampler, admitted: int) -> None:
        """Admitted to a sequence, the admitted-th prompt: the array that steps read (prompt, then generated
        tokens, with room for all of them: steps hold its address) is made now, so that waiting requests hold
        only their prompt."""
        room = min(self.n_prompt + self.params.max_tokens, self.n_ctx_seq + 1)
        self.tokens = array(TOKEN_TYPECODE, self.key + bytes(TOKEN_BYTES * max(0, room - self.n_prompt)))
        self.seq = seq
        self.sampler = sampler
        self.n_past = 0
        self.admitted = admitted

    @property
    def status(self) -> RequestStatus:
        if self.completion is not None:
            return RequestStatus.FINISHED
        if self.seq < 0:
            return RequestStatus.WAITING
        if self.awaiting_prefix:
            return RequestStatus.AWAITING_PREFIX
        if self.scoring_labels:
            return RequestStatus.SCORING_LABELS
        return RequestStatus.GENERATING if self.n_tokens - self.n_past == 1 else RequestStatus.PREFILLING

    @property
    def score(self):
        """The scoring of the prompt's last row (choices), else None."""
        return self.choice.first if self.choice is not None else None

    @property
    def scoring_labels(self) -> bool:
        """Its prompt is decoded and labels are still being scored."""
        return self.choice is not None and self.n_past == self.n_tokens

    @property
    def streamed(self) -> bool:
        """Someone reads its answer as it comes: the scheduler puts it ahead of prompts that are only waited on."""
        return self.sink is not None

    @property
    def awaiting_prefix(self) -> bool:
        return self.prefix is not None and self.n_copied == 0

    @property
    def n_gen(self) -> int:
        return self.n_tokens - self.n_prompt

    # ---- as the holder of a step slot (see scheduler.py) ----

    @property
    def gone(self) -> bool:
        return self.seq < 0

    def calls(self, active) -> List["Call"]:
        return [self.call]

    def after_step(self, slot) -> Optional["PromptEvent"]:
        if slot.sampler:  # the step sampled for it (a NULL pointer is false)
            return TokenSampled(self, slot.token, slot.is_eog)
        if slot.n_score_rows > 0:
            return FirstTokensScored(self)
        return None

    def cleared(self) -> "PromptCleared":
        return PromptCleared(self)

    def failed(self, why: str) -> "PromptFailed":
        return PromptFailed(self, f"{why} for this prompt")

    def accept(self, token: int, is_eog: bool) -> Optional[FinishReason]:
        """Takes the token sampled for this request; returns why it is finished, or None."""
        if is_eog:
            return "stop"
        self.tokens[self.n_tokens] = token
        self.n_tokens += 1
        piece = self.pieces(token)
        self.text += piece
        if self.stops is not None:
            end = self.stops.cut(self.text, len(piece))
            if end >= 0:
                self.text = self.text[:end]
                return "stop"
        if self.n_gen >= self.params.max_tokens or self.n_tokens - 1 >= self.n_ctx_seq:
            return "length"
        if self.sink is not None:
            self._show(len(self.text) - (self.stops.held_back(self.text) if self.stops else 0), False)
        return None

    def _show(self, end: int, final: bool) -> None:
        if end > self.n_shown or final:
            self.sink(self.text[self.n_shown:end], final)
            self.n_shown = max(end, self.n_shown)

    def finish(self, reason: FinishReason, error: Optional[str] = None, engine_error: bool = False) -> None:
        """Records the result (engine thread, or the caller for a prompt that never ran) and tells the caller;
        engine_error: the error is the engine's, not the prompt's (see Completion)."""
        if self.completion is not None:
            return
        if self.choice is not None and reason == "stop":
            best, probs, logprobs = self.choice.result()
            label_tokens = self.choice.tokens[best]
            self.text = self.choice.labels[best].encode("utf-8")  # a stream shows the label too
            self.completion = Completion(
                text=self.choice.labels[best], token_ids=list(label_tokens), finish_reason="stop",
                n_prompt_tokens=self.n_prompt, n_gen_tokens=len(label_tokens), n_cached_tokens=self.n_cached,
                choice_probs=probs, choice_logprobs=logprobs)
        else:
            self.completion = Completion(
                text=self.text.decode("utf-8", "replace") if reason != "error" else "",
                token_ids=list(self.tokens[self.n_prompt:self.n_tokens]) if self.n_gen and reason != "error" else [],
                finish_reason=reason, error=error, n_prompt_tokens=self.n_prompt,
                n_gen_tokens=self.n_gen if reason != "error" else 0, n_cached_tokens=self.n_cached,
                engine_error=engine_error)
        self.tokens = None
        self.call.finished(self)  # first: a stream that sees its end reads the completion
        if self.sink is not None:
            self._show(len(self.text), True)



# What a step did for a prompt (step_events.py gathers every holder's events).
@dataclass(frozen=True)
class TokenSampled:
    """A token was sampled for a prompt (negative: its grammar allows none)."""

    request: Request
    token: int
    is_eog: bool


@dataclass(frozen=True)
class FirstTokensScored:
    """A prompt's last row scored the first token of each of its labels."""

    request: Request


@dataclass(frozen=True)
class PromptCleared:
    """A failed step left a prompt's sequence empty: it decodes its whole prompt itself from now on."""

    request: Request


@dataclass(frozen=True)
class PromptFailed:
    """A prompt cannot be decoded even alone."""

    request: Request
    why: str


PromptEvent = Union[TokenSampled, FirstTokensScored, PromptCleared, PromptFailed]

class Call:
    """The requests of one caller: waits for them, shows progress, gathers the call's statistics."""

    def __init__(self, n_prompts: int) -> None:
        self.requests: List[Optional[Request]] = [None] * n_prompts
        self.completions: List[Optional[Completion]] = [None] * n_prompts
        self.done_order: List[int] = []  # indices of finished prompts, in the order they finished
        self._n_done = 0
        self._done = threading.Event()
        if n_prompts == 0:
            self._done.set()
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[], None]] = []
        self.closed = False
        self.t_start = 0.0
        self.n_decode_calls = 0
        self.n_fallbacks = 0
        self.t_prompt_s = 0.0
        self.t_gen_s = 0.0

    def failed_early(self, index: int, n_prompt_tokens: int, error: str) -> None:
        """A prompt that cannot run at all (it is never submitted)."""
        self.completions[index] = Completion(text="", finish_reason="error", error=error,
                                             n_prompt_tokens=n_prompt_tokens)
        self._count_one(index)

    def finished(self, request: Request) -> None:
        self.completions[request.index] = request.completion
        self._count_one(request.index)

    def _count_one(self, index: int) -> None:
        with self._lock:
            self.done_order.append(index)
            self._n_done += 1
            if self._n_done < len(self.completions):
                return
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Calls fn() once every request is finished: now if they are, else in the thread that finishes the
        last one (usually the engine thread, so fn must be quick and must not raise)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn()

    @property
    def n_done(self) -> int:
        return self._n_done

    def wait(self, progress: Progress, cancel: Callable[["Call"], None],
             on_done: Optional[Callable[[List[Tuple[int, Completion]]], None]] = None) -> None:
        """Blocks until every request is finished. An exception here (Ctrl-C, or from on_done) cancels
        this call's requests, waits until the engine has freed their sequences, and propagates.
        ``on_done`` receives, in the waiting thread, the prompts finished since its last call (index, answer)."""
        bar = progress_bar(len(self.completions), progress, "prompt", "newrllama")
        shown = 0
        handed = 0
        try:
            # Short waits keep the caller's thread in Python, where Ctrl-C is raised.
            finished = False
            while not finished:
                finished = self._done.wait(0.1)
                if self._n_done > shown:
                    bar.update(self._n_done - shown)
                    shown = self._n_done
                if on_done is not None and len(self.done_order) > handed:
                    new = self.done_order[handed:]
                    handed += len(new)
                    on_done([(i, self.completions[i]) for i in new])
        except BaseException:
            cancel(self)
            while not self._done.wait(0.1):
                pass
            raise
        finally:
            bar.update(self._n_done - shown)
            bar.close()
        if self.closed:
            raise ClosedError("the context was closed while this call was running")

    def stats(self, t_end: float) -> GenerationStats:
        done = [c for c in self.completions if c is not None]
        n_gen = sum(c.n_gen_tokens for c in done)
        t_total = t_end - self.t_start
        return GenerationStats(
            n_prompts=len(self.completions), n_prompt_tokens=sum(c.n_prompt_tokens for c in done),
            n_gen_tokens=n_gen, n_cached_tokens=sum(c.n_cached_tokens for c in done),
            t_prompt_s=self.t_prompt_s, t_gen_s=self.t_gen_s, t_total_s=t_total,
            tokens_per_second=n_gen / t_total if t_total > 0 else 0.0, n_decode_calls=self.n_decode_calls,
            n_fallbacks=self.n_fallbacks, n_failed=sum(c.finish_reason == "error" for c in done))

