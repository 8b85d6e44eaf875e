"""The scheduler of a context: it runs every caller's prompts in one batch, on the process's engine thread
(engine_thread.py), which is the only thread that decodes.

Callers (generate_parallel, generate, stream, from any thread) hand it Requests and
wait; the engine thread admits waiting requests to free sequences as soon as one
is free (continuous batching), builds each step (one token for every generating
request, then prefill chunks in the room left in n_batch), and runs it with one C
call (newrllama_step: decode, then sample every request that wants a token). The
policy lives here: admission, stop strings, max_tokens, cancellation, the fallback
to decoding requests one at a time when a batched step fails, the prefix cache
(prefix_cache.py: at admission a prompt copies the longest start that a cached run
or a running prompt holds, or waits in its sequence while a start it shares with
other prompts is decoded as part of the steps; room a step leaves goes to the runs
of prompts still waiting for a sequence; a finished prompt's run is kept),
statistics. Its Python cost is per event (an admitted prompt, a sampled token),
not per vocabulary entry; EngineStats.python_us_per_step measures it.

A step is assembled by step_assembly.py (for holders of three kinds: a Request, a
cached run being decoded, a label path being scored) and labels are scored across
steps by label_flow.py. After a step each holder reports what happened to it as an
event (step_events.py) and the scheduler acts on it (act): holders never call back."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

from .. import _lib
from .._lib import ffi, lib
from .engine_thread import engine
from ..errors import ClosedError
from .kv_store import KvStore
from .label_flow import LabelFlow
from .policy import SchedulerConfig, WaitingQueue
from .prefix_cache import MIN_SHARED_TOKENS, PrefixCache, common_prefix_length, shared_start_lengths, \
    shares_start, worth_caching
from .reproducibility import Determinism
from .sequence_layout import SequenceLayout
from .request import Call, Request
from .step_assembly import SlotHolder, StepAssembly
from .step_events import (FirstTokensScored, LabelPathCleared, LabelPathFailed, LabelPathScored, PromptCleared,
                          PromptFailed, RunCleared, RunFailed, RunReady, StepEvent, TokenSampled)


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


class Scheduler:
    def __init__(self, ctx_handle, kv: KvStore, layout: SequenceLayout, cache: Optional[PrefixCache],
                 determinism: Optional[Determinism], config: SchedulerConfig) -> None:
        self._ctx = ctx_handle
        self._kv = kv
        self._n_batch = layout.n_batch
        self.config = config
        self.determinism = determinism
        self.cache = cache
        self.labels = LabelFlow(kv, layout.scratch_seqs, layout.n_batch)
        self.assembly = StepAssembly(layout.n_sequences, layout.n_batch, config, cache, self.labels)
        self._engine = engine()
        self._cv = self._engine.cv  # one lock for every context's scheduler: they share the engine thread
        self._incoming: List[Request] = []
        self._cancel_requested = False
        self._closing = False
        self._waiting = WaitingQueue(config)
        self._active: List[Optional[Request]] = [None] * layout.n_seq  # by sequence id
        self._decode_code = ffi.new("int32_t *")
        self._err = _lib.new_error_slot()
        self._n_admitted = 0
        self._n_steps = 0
        self._t_step = 0.0
        self._t_python = 0.0

    # ---- callers' side (any thread) ----------------------------------------------

    def submit(self, requests: List[Request]) -> None:
        with self._cv:
            if self._closing:
                raise ClosedError("this context is closed")
            self._incoming.extend(requests)
            self._engine.attach(self)

    def cancel(self, call: Call) -> None:
        """Cancels a call's unfinished requests; the engine frees them before its next step."""
        for r in call.requests:
            if r is not None:
                r.cancelled = True
        with self._cv:
            self._cancel_requested = True
            self._cv.notify_all()

    def stats(self) -> EngineStats:
        cache = self.cache
        with self._cv:
            n_waiting = len(self._incoming) + len(self._waiting)
        return EngineStats(self._n_steps, self._t_step, self._t_python, len(cache.entries) if cache else 0,
                           cache.n_evictions if cache else 0, sum(r is not None for r in self._active), n_waiting,
                           self.determinism)

    def close(self) -> None:
        """Takes the scheduler off the engine thread; requests still running end with an error."""
        with self._cv:
            self._closing = True
        self._engine.detach(self)
        self._fail_all("the context was closed", closed=True)

    # ---- the engine thread -------------------------------------------------------

    def wants_turn(self) -> bool:
        return not self._closing and bool(self._incoming or self._cancel_requested or self._has_work())

    def take_incoming(self) -> bool:
        for r in self._incoming:
            self._waiting.push(r, self._n_steps)
        self._incoming.clear()
        reap, self._cancel_requested = self._cancel_requested, False
        return reap

    def turn(self, reap: bool) -> None:
        t0 = time.perf_counter()
        try:
            if reap:
                self._reap_cancelled()
            self._admit()
            t_step = self._step() if any(r is not None for r in self._active) else 0.0
            if self.cache is not None and not self._has_work():
                self.cache.drop_unclaimed()
        except BaseException as exc:  # a bug must not hang every caller: fail what runs, keep serving
            self._fail_all(f"internal error in the scheduler: {exc!r}")
            return
        self._t_python += time.perf_counter() - t0 - t_step

    def _has_work(self) -> bool:
        return bool(self._waiting) or any(r is not None for r in self._active)

    def _reap_cancelled(self) -> None:
        cancelled = self._waiting.remove_cancelled()
        for r in cancelled:
            r.finish("cancelled", "cancelled")
        if cancelled and self.cache is not None:  # runs made ahead for them go; the others' are made again
            self.cache.drop_unclaimed()
            for r in self._waiting:
                r.runs_ahead = False
        for r in self._active:
            if r is not None and r.cancelled:
                self.retire(r, "cancelled", "cancelled")

    def _admit(self) -> None:
        admitted = []
        for seq, occupant in enumerate(self._active):
            if occupant is not None:
                continue
            while self._waiting:
                r = self._waiting.pop(self._n_steps)
                if self._start(r, seq):
                    admitted.append(r)
                    break
        if self.cache is None:
            return
        if len(admitted) > 1:  # prompts admitted together, from any callers, share their common starts
            for r, lengths in zip(admitted, shared_start_lengths([r.key for r in admitted])):
                if lengths:
                    r.shared = worth_caching(r.shared + lengths, r.n_prompt - 1)
        for r in admitted:
            self._attach_prefix(r)

    def _start(self, r: Request, seq: int) -> bool:
        """Gives a waiting request sequence seq; False if it ended instead (cancelled, or it cannot run)."""
        if r.cancelled:
            r.finish("cancelled", "cancelled")
            return False
        refusal = self.labels.refusal(r)
        if refusal is not None:
            r.finish("error", refusal)
            return False
        sampler = None  # for choices: labels are scored, not sampled
        if r.choice is None:
            out = ffi.new("newrllama_sampler_handle *")
            grammar = r.grammar if r.grammar is not None else ffi.NULL
            if lib.newrllama_sampler_create_ex(self._ctx, r.c_params, r.seed, grammar, out, self._err) != lib.NEWRLLAMA_OK:
                # Its grammar was parsed when the call was prepared: what fails here is memory.
                r.finish("error", ffi.string(self._err[0]).decode("utf-8", "replace"), engine_error=True)
                return False
            sampler = out[0]
        r.start(seq, sampler, self._n_admitted)
        self._n_admitted += 1
        self._active[seq] = r
        return True

    def _attach_prefix(self, r: Request) -> None:
        running_seq, n_running = self._running_start(r)
        prefix, n = self.cache.lookup(r.key, r.shared, (running_seq, n_running))
        if prefix is not None:
            r.prefix = prefix
            if prefix.ready:
                self._copy_prefix(r, n)
        elif n > 0:  # the running prompt decoded these tokens itself
            self._kv.copy(running_seq, r.seq, n)
            r.n_past = r.n_copied = r.n_cached = n

    def _running_start(self, r: Request) -> Tuple[int, int]:
        """The running prompt whose decoded cells give r the longest start (its sequence, how many tokens)."""
        best_seq, best_n = -1, 0
        limit = r.n_prompt - 1
        for d in self._active:
            if d is None or d is r:
                continue
            n = min(d.n_past, d.n_prompt, limit)
            if (n < MIN_SHARED_TOKENS or n <= best_n or not self.cache.can_cut(d.n_past)
                    or not shares_start(r.key, d.key, max(best_n + 1, MIN_SHARED_TOKENS))):
                continue
            best_seq, best_n = d.seq, min(n, common_prefix_length(r.key, d.key))
        return best_seq, best_n

    def _copy_prefix(self, r: Request, n: int) -> None:
        self._kv.copy(r.prefix.seq, r.seq, n)
        r.n_past = r.n_copied = n
        r.n_cached = n - PrefixCache.charge(r.prefix, n)

    def _let_go_of_prefix(self, r: Request) -> None:
        """The request decodes its whole prompt itself from now on (its copy is gone, or never came)."""
        if r.prefix is not None:
            self.cache.release(r.prefix)
            r.prefix = None
        r.n_cached = r.n_copied = 0
        r.n_past = 0

    def _run_ready(self, p) -> None:
        self.cache.prefix_ready(p)
        for r in self._active:
            if r is not None and r.prefix is p and r.awaiting_prefix:
                self._copy_prefix(r, p.n_tokens)

    def _run_failed(self, p) -> None:
        for r in self._active:
            if r is not None and r.prefix is p:
                self._let_go_of_prefix(r)
        self.cache.drop(p)

    def _calls_of(self, holders: List[SlotHolder]) -> Iterable[Call]:
        return {id(c): c for h in holders for c in h.calls(self._active)}.values()

    def _advance(self, h: SlotHolder, n: int, slot) -> bool:
        """Records a holder's decoded tokens; True once it reached its next stop (a token, scores, a ready
        run) or it is gone (its request ended while this step ran for it)."""
        if h.gone:
            return True
        h.n_past += n
        event = h.after_step(slot)
        if event is None:
            return False
        self.act(event)
        return True

    def _step(self) -> float:
        prefill = self.assembly.build(self._active, self._waiting, self._n_steps)
        holders = self.assembly.holders
        slots = self.assembly.slots
        if not holders:  # every admitted request waits for a run that has no room yet
            return 0.0
        t0 = time.perf_counter()
        code = lib.newrllama_step(self._ctx, slots, len(holders), self._decode_code, self._err)
        dt = time.perf_counter() - t0
        self._n_steps += 1
        self._t_step += dt
        calls = self._calls_of(holders)
        for call in calls:
            call.n_decode_calls += 1
            if prefill:
                call.t_prompt_s += dt
            else:
                call.t_gen_s += dt
        if code == lib.NEWRLLAMA_OK:
            for i, h in enumerate(holders):
                self._advance(h, slots[i].n_tokens, slots[i])
            return dt
        if code != lib.NEWRLLAMA_ERROR_DECODE:
            _lib.raise_for(code, self._err)
        for i, h in enumerate(holders):
            if slots[i].status == lib.NEWRLLAMA_SLOT_CLEARED:
                self.act(h.cleared())
        if self._decode_code[0] == 1 and self.cache is not None and self.cache.evict_idle():
            return dt  # no free KV cells: idle cached runs are gone now, and the next step retries
        for call in calls:
            call.n_fallbacks += 1
        return dt + self._one_by_one(holders, self._decode_code[0])

    def _one_by_one(self, holders: List[SlotHolder], batch_code: int) -> float:
        """A batched step failed and was rolled back: decode each of its holders alone up to its
        next stop (a run: to its end), so that only one that cannot proceed on its own fails."""
        t_total = 0.0
        slots = self.assembly.slots
        for h in holders:
            while not h.gone:
                n = self.assembly.fill(0, h, self._n_batch)
                t0 = time.perf_counter()
                code = lib.newrllama_step(self._ctx, slots, 1, self._decode_code, self._err)
                t_total += time.perf_counter() - t0
                for call in self._calls_of([h]):
                    call.n_decode_calls += 1
                if code != lib.NEWRLLAMA_OK:
                    if code != lib.NEWRLLAMA_ERROR_DECODE:
                        _lib.raise_for(code, self._err)
                    self.act(h.failed(f"llama_decode failed (code {self._decode_code[0]}; "
                                      f"batched decode code {batch_code})"))
                    break
                if self._advance(h, n, slots[0]):
                    break
        return t_total

    def act(self, event: StepEvent) -> None:
        """What the scheduler does on what a step did for one of its holders."""
        if isinstance(event, TokenSampled):
            self._on_token(event.request, event.token, event.is_eog)
        elif isinstance(event, FirstTokensScored):
            self.labels.first_tokens_scored(event.request)
            self._after_scores(event.request)
        elif isinstance(event, LabelPathScored):
            self.labels.path_scored(event.job)
            self._after_scores(event.job.owner)
        elif isinstance(event, RunReady):
            self._run_ready(event.prefix)
        elif isinstance(event, PromptCleared):
            self._let_go_of_prefix(event.request)
        elif isinstance(event, RunCleared):
            self.cache.restart(event.prefix)
        elif isinstance(event, LabelPathCleared):
            self.labels.path_cleared(event.job)
        elif isinstance(event, PromptFailed):
            self.retire(event.request, "error", event.why, engine_error=True)
        elif isinstance(event, LabelPathFailed):
            self.retire(event.job.owner, "error", event.why, engine_error=True)
        elif isinstance(event, RunFailed):
            self._run_failed(event.prefix)
        else:
            raise TypeError(f"not a step event: {event!r}")

    def _after_scores(self, r: Request) -> None:
        if r.choice.done:
            self.retire(r, "stop")
        elif r.cancelled:
            self.retire(r, "cancelled", "cancelled")

    def _on_token(self, r: Request, token: int, is_eog: bool) -> None:
        if token < 0:
            self.retire(r, "error", "the grammar allows no token here (it cannot be completed)")
            return
        reason = r.accept(token, is_eog)
        if reason is not None:
            self.retire(r, reason)
        elif r.cancelled:
            self.retire(r, "cancelled", "cancelled")

    def retire(self, r: Request, reason, error: Optional[str] = None, engine_error: bool = False) -> None:
        """Ends an admitted request: frees its sampler and its sequence (what it decoded stays cached),
        then reports the result."""
        free_sampler(r)
        self.labels.end_jobs_of(r)
        source = r.prefix
        if source is not None:
            self.cache.release(source)
            r.prefix = None
        if r.seq >= 0:
            if self.cache is not None and reason != "error" and r.n_past > 0:
                self.cache.keep(r.seq, r.tokens[:r.n_past].tobytes(), source, r.n_copied)
            self._kv.clear(r.seq)
            self._active[r.seq] = None
            r.seq = -1
        r.finish(reason, error, engine_error)

    def _fail_all(self, message: str, closed: bool = False) -> None:
        with self._cv:
            pending = list(self._incoming) + self._waiting.take_all()
            self._incoming.clear()
        for r in self._active:
            if r is not None:
                pending.append(r)
                free_sampler(r)
                self._active[r.seq] = None
                r.seq = -1
        for seq in range(len(self._active)):
            self._kv.clear(seq)
        self.labels.reset()
        if self.cache is not None:
            self.cache.clear()
        for r in pending:
            if closed:
                r.call.closed = True
            r.finish("error", message, engine_error=True)


def free_sampler(request: Request) -> None:
    if request.sampler is not None:
        lib.newrllama_sampler_free(request.sampler)
        request.sampler = None
