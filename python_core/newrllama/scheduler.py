"""The scheduler: one engine thread owns a context and runs every caller's prompts in one batch.

Callers (generate_parallel, generate, stream, from any thread) hand it Requests and
wait; the engine thread admits waiting requests to free sequences as soon as one
is free (continuous batching), builds each step (one token for every generating
request, then prefill chunks in the room left in n_batch), and runs it with one C
call (newrllama_step: decode, then sample every request that wants a token). The
policy lives here: admission, stop strings, max_tokens, cancellation, the fallback
to decoding requests one at a time when a batched step fails, the prefix cache
(prefix_cache.py: a prompt starting with a cached prefix copies it at admission,
or waits in its sequence while the prefix is decoded as part of the steps),
statistics. Its Python cost is per event (an admitted prompt, a sampled token),
not per vocabulary entry; EngineStats.python_us_per_step measures it."""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import Deque, List, Optional, Union

from . import _lib
from ._lib import ffi, lib
from .errors import ClosedError
from .choices import LabelJob
from .prefix_cache import Prefix, PrefixCache
from .request import Call, Request, free_sampler

Holder = Union[Request, Prefix, LabelJob]  # what a slot of a step decodes for


@dataclass(frozen=True)
class EngineStats:
    """Figures of a context's engine thread since the context was made."""

    n_steps: int
    t_step_s: float     # inside newrllama_step (decode and sampling, in C)
    t_python_s: float   # the scheduler's own work around the steps
    n_cached_prefixes: int = 0  # prefixes the prefix cache holds now
    n_prefix_evictions: int = 0
    n_running: int = 0          # prompts holding a sequence now
    n_waiting: int = 0          # prompts submitted and waiting for a sequence

    @property
    def python_us_per_step(self) -> float:
        return 1e6 * self.t_python_s / self.n_steps if self.n_steps else 0.0


class Scheduler:
    def __init__(self, ctx_handle, n_seq_max: int, n_batch: int, cache: Optional[PrefixCache],
                 scratch_seqs: List[int]) -> None:
        self._ctx = ctx_handle
        self._n_batch = n_batch
        self._cache = cache
        self._scratch_seqs = tuple(scratch_seqs)
        self._scratch = list(scratch_seqs)  # free sequences for LabelJobs (choices with multi-token labels)
        self._cv = threading.Condition()
        self._incoming: List[Request] = []
        self._cancel_requested = False
        self._closing = False
        self._waiting: Deque[Request] = collections.deque()
        self._active: List[Optional[Request]] = [None] * n_seq_max  # by sequence id
        self._slots = ffi.new("newrllama_slot[]", n_seq_max + lib.newrllama_context_n_seq_cache(ctx_handle))
        self._slot_holders: List[Holder] = []
        self._decode_code = ffi.new("int32_t *")
        self._err = _lib.new_error_slot()
        self._n_steps = 0
        self._t_step = 0.0
        self._t_python = 0.0
        self._thread: Optional[threading.Thread] = None

    # ---- callers' side (any thread) ----------------------------------------------

    def submit(self, requests: List[Request]) -> None:
        with self._cv:
            if self._closing:
                raise ClosedError("this context is closed")
            self._incoming.extend(requests)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="newrllama-engine", daemon=True)
                self._thread.start()
            self._cv.notify()

    def cancel(self, call: Call) -> None:
        """Cancels a call's unfinished requests; the engine frees them before its next step."""
        for r in call.requests:
            if r is not None:
                r.cancelled = True
        with self._cv:
            self._cancel_requested = True
            self._cv.notify()

    def stats(self) -> EngineStats:
        cache = self._cache
        with self._cv:
            n_waiting = len(self._incoming) + len(self._waiting)
        return EngineStats(self._n_steps, self._t_step, self._t_python, len(cache.entries) if cache else 0,
                           cache.n_evictions if cache else 0, sum(r is not None for r in self._active), n_waiting)

    def close(self) -> None:
        """Stops the engine thread; requests still running end with an error."""
        with self._cv:
            self._closing = True
            self._cv.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._fail_all("the context was closed", closed=True)

    # ---- the engine thread -------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cv:
                while not (self._incoming or self._cancel_requested or self._closing or self._has_work()):
                    self._cv.wait()
                if self._closing:
                    return
                self._waiting.extend(self._incoming)
                self._incoming.clear()
                reap = self._cancel_requested
                self._cancel_requested = False
            t0 = time.perf_counter()
            try:
                if reap:
                    self._reap_cancelled()
                self._admit()
                t_step = self._step() if any(r is not None for r in self._active) else 0.0
            except BaseException as exc:  # a bug must not hang every caller: fail what runs, keep serving
                self._fail_all(f"internal error in the scheduler: {exc!r}")
                continue
            self._t_python += time.perf_counter() - t0 - t_step

    def _has_work(self) -> bool:
        return bool(self._waiting) or any(r is not None for r in self._active)

    def _reap_cancelled(self) -> None:
        for r in [r for r in self._waiting if r.cancelled]:
            self._waiting.remove(r)
            r.finish("cancelled", "cancelled")
        for r in self._active:
            if r is not None and r.cancelled:
                self._retire(r, "cancelled", "cancelled")

    def _admit(self) -> None:
        for seq, occupant in enumerate(self._active):
            if occupant is not None:
                continue
            while self._waiting:
                r = self._waiting.popleft()
                if r.cancelled:
                    r.finish("cancelled", "cancelled")
                    continue
                if r.choice is not None and r.choice.waiting and (
                        not self._scratch_seqs or r.choice.longest > self._n_batch):
                    r.finish("error", "scoring labels needs a scratch sequence (a label and its end are decoded "
                                      f"after the prompt) and labels of fewer than n_batch = {self._n_batch} tokens "
                                      "(make n_batch larger than n_seq_max)")
                    continue
                out = ffi.new("newrllama_sampler_handle *")  # NULL for choices: labels are scored, not sampled
                if r.choice is None and lib.newrllama_sampler_create_ex(self._ctx, r.c_params, r.seed, r.grammar, out,
                                                                        self._err) != lib.NEWRLLAMA_OK:
                    r.finish("error", ffi.string(self._err[0]).decode("utf-8", "replace"))
                    continue
                r.start(seq, out[0])
                self._active[seq] = r
                if self._cache is not None:
                    self._attach_prefix(r)
                break

    def _attach_prefix(self, r: Request) -> None:
        prefix, n = self._cache.lookup(r.prompt, r.shared)
        if prefix is not None:
            r.prefix = prefix
            if prefix.ready:
                self._copy_prefix(r, n)

    def _copy_prefix(self, r: Request, n: int) -> None:
        _lib.check(lib.newrllama_seq_copy(self._ctx, r.prefix.seq, r.seq, n, self._err), self._err)
        r.n_past = r.n_cached = n

    def _let_go_of_prefix(self, r: Request) -> None:
        """The request decodes its whole prompt itself from now on (its copy is gone, or never came)."""
        if r.prefix is not None:
            PrefixCache.release(r.prefix)
            r.prefix = None
        r.n_cached = 0
        r.n_past = 0

    def _prefix_ready(self, p: Prefix) -> None:
        self._cache.prefix_ready(p)
        for r in self._active:
            if r is not None and r.prefix is p and r.awaiting_prefix:
                self._copy_prefix(r, p.n_tokens)

    def _prefix_failed(self, p: Prefix) -> None:
        for r in self._active:
            if r is not None and r.prefix is p:
                self._let_go_of_prefix(r)
        self._cache.drop(p)

    def _fill(self, i: int, h: Holder, room: int) -> int:
        left = h.n_tokens - h.n_past
        n = left if left < room else room
        s = self._slots[i]
        s.seq_id = h.seq
        s.pos = h.n_past
        s.tokens = h.tokens + h.n_past
        s.n_tokens = n
        s.sampler = h.sampler if n == left else ffi.NULL
        score = h.score if n == left else None
        if score is None:
            s.n_score_rows = 0
        else:
            s.n_score_rows, s.n_targets, s.targets, s.target_rows, s.logprobs = score
        return n

    def _build(self) -> bool:
        """Fills the slots: generating requests first, then prefixes being cached, then prompts'
        prefill chunks. True if the step carries prompt tokens."""
        holders = self._slot_holders = []
        room = self._n_batch
        prefilling: List[Holder] = self._cache.decoding() if self._cache is not None else []
        for r in self._active:
            if r is None or r.awaiting_prefix:
                continue
            if r.scoring_labels:
                room = self._add_label_jobs(r, holders, room)
            elif r.n_tokens - r.n_past == 1:
                room -= self._fill(len(holders), r, room)
                holders.append(r)
            else:
                prefilling.append(r)
        prefill = False
        for h in prefilling:
            if room <= 0:
                break
            room -= self._fill(len(holders), h, room)
            holders.append(h)
            prefill = True
        if self._cache is not None:
            own = sum(r.n_past - r.n_cached for r in self._active if r is not None)
            self._cache.make_room(own + self._n_batch - room)
        return prefill

    def _add_label_jobs(self, r: Request, holders: List[Holder], room: int) -> int:
        """Starts scoring r's waiting label paths, as many as scratch sequences and room allow."""
        choice = r.choice
        while choice.waiting and self._scratch and len(choice.waiting[-1].body) <= room:
            job = LabelJob(r, choice.waiting.pop(), self._scratch.pop(), r.n_tokens)
            _lib.check(lib.newrllama_seq_copy(self._ctx, r.seq, job.seq, -1, self._err), self._err)
            choice.running.append(job)
            room -= self._fill(len(holders), job, room)
            holders.append(job)
        return room

    def _end_job(self, job: LabelJob) -> None:
        lib.newrllama_seq_clear(self._ctx, job.seq, ffi.NULL)
        self._scratch.append(job.seq)
        job.owner.choice.running.remove(job)

    def _calls_of(self, holders: List[Holder]):
        calls = {}
        for h in holders:
            if isinstance(h, Request):
                calls[id(h.call)] = h.call
            elif isinstance(h, LabelJob):
                calls[id(h.owner.call)] = h.owner.call
            else:  # a prefix works for the calls waiting for it
                for r in self._active:
                    if r is not None and r.prefix is h:
                        calls[id(r.call)] = r.call
        return calls.values()

    @staticmethod
    def _gone(h: Holder) -> bool:
        """Its request ended while a step it was part of ran (a cancelled prompt's label job, say)."""
        return isinstance(h, LabelJob) and h not in h.owner.choice.running or isinstance(h, Request) and h.seq < 0

    def _advance(self, h: Holder, n: int, slot) -> bool:
        """Records a holder's decoded tokens; True once it reached its next stop (a token, scores, a ready
        prefix) or it is gone (its request ended while this step ran for it)."""
        if self._gone(h):
            return True
        h.n_past += n
        if slot.sampler != ffi.NULL:
            self._on_token(h, slot.token, slot.is_eog)
            return True
        if slot.n_score_rows > 0:
            self._on_scores(h)
            return True
        if isinstance(h, Prefix) and h.ready:
            self._prefix_ready(h)
            return True
        return False

    def _step(self) -> float:
        prefill = self._build()
        holders = self._slot_holders
        if not holders:  # every admitted request waits for a prefix that has no room yet
            return 0.0
        t0 = time.perf_counter()
        code = lib.newrllama_step(self._ctx, self._slots, len(holders), self._decode_code, self._err)
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
                self._advance(h, self._slots[i].n_tokens, self._slots[i])
            return dt
        if code != lib.NEWRLLAMA_ERROR_DECODE:
            _lib.raise_for(code, self._err)
        for i, h in enumerate(holders):
            if self._slots[i].status == lib.NEWRLLAMA_SLOT_CLEARED:
                self._restart(h)
        if self._decode_code[0] == 1 and self._cache is not None and self._cache.evict_idle():
            return dt  # no free KV cells: idle cached prefixes are gone now, and the next step retries
        for call in calls:
            call.n_fallbacks += 1
        return dt + self._one_by_one(holders, self._decode_code[0])

    def _restart(self, h: Holder) -> None:
        """A failed step left its sequence empty: it is decoded again from its start."""
        if isinstance(h, Request):
            self._let_go_of_prefix(h)
        elif isinstance(h, LabelJob):  # scored again from a new copy of its prompt
            h.owner.choice.waiting.append(h.path)
            self._end_job(h)
        else:
            self._cache.restart(h)

    def _one_by_one(self, holders: List[Holder], batch_code: int) -> float:
        """A batched step failed and was rolled back: decode each of its holders alone up to its
        next token (a prefix: to its end), so that only one that cannot proceed on its own fails."""
        t_total = 0.0
        for h in holders:
            while not self._gone(h):
                n = self._fill(0, h, self._n_batch)
                t0 = time.perf_counter()
                code = lib.newrllama_step(self._ctx, self._slots, 1, self._decode_code, self._err)
                t_total += time.perf_counter() - t0
                for call in self._calls_of([h]):
                    call.n_decode_calls += 1
                if code != lib.NEWRLLAMA_OK:
                    if code != lib.NEWRLLAMA_ERROR_DECODE:
                        _lib.raise_for(code, self._err)
                    if isinstance(h, Prefix):
                        self._prefix_failed(h)
                    elif isinstance(h, LabelJob):
                        self._retire(h.owner, "error", f"llama_decode failed scoring a label of this prompt "
                                                       f"(code {self._decode_code[0]}; batched decode code {batch_code})")
                    else:
                        self._retire(h, "error", f"llama_decode failed for this prompt (code {self._decode_code[0]}; "
                                                 f"batched decode code {batch_code})")
                    break
                if self._advance(h, n, self._slots[0]):
                    break
        return t_total

    def _on_scores(self, h: Holder) -> None:
        if isinstance(h, LabelJob):
            r = h.owner
            h.add_scores(r.choice.logprob)
            self._end_job(h)
        else:
            r = h
            r.choice.record_first()
        if r.choice.done:
            self._retire(r, "stop")
        elif r.cancelled:
            self._retire(r, "cancelled", "cancelled")

    def _on_token(self, r: Request, token: int, is_eog: bool) -> None:
        if token < 0:
            self._retire(r, "error", "the grammar allows no token here (it cannot be completed)")
            return
        reason = r.accept(token, is_eog)
        if reason is not None:
            self._retire(r, reason)
        elif r.cancelled:
            self._retire(r, "cancelled", "cancelled")

    def _retire(self, r: Request, reason, error: Optional[str] = None) -> None:
        """Ends an admitted request: frees its sampler and its sequence, then reports the result."""
        free_sampler(r)
        if r.choice is not None:
            for job in list(r.choice.running):
                self._end_job(job)
        if r.prefix is not None:
            PrefixCache.release(r.prefix)
            r.prefix = None
        if r.seq >= 0:
            lib.newrllama_seq_clear(self._ctx, r.seq, ffi.NULL)
            self._active[r.seq] = None
            r.seq = -1
        r.finish(reason, error)

    def _fail_all(self, message: str, closed: bool = False) -> None:
        with self._cv:
            pending = list(self._incoming) + list(self._waiting)
            self._incoming.clear()
            self._waiting.clear()
        for r in self._active:
            if r is not None:
                pending.append(r)
                free_sampler(r)
                self._active[r.seq] = None
                r.seq = -1
        for seq in range(len(self._active)):
            lib.newrllama_seq_clear(self._ctx, seq, ffi.NULL)
        for seq in self._scratch_seqs:
            lib.newrllama_seq_clear(self._ctx, seq, ffi.NULL)
        self._scratch = list(self._scratch_seqs)
        if self._cache is not None:
            self._cache.clear()
        for r in pending:
            if closed:
                r.call.closed = True
            r.finish("error", message)
