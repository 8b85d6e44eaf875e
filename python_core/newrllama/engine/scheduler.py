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

A step's slots are filled for holders of three kinds (a Request, a cached run being
decoded, a label being scored), which the scheduler drives through one interface:
SlotHolder."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Iterable, List, Optional, Protocol, Tuple

from .. import _lib
from .._lib import ffi, lib
from .engine_thread import engine
from ..errors import ClosedError
from .kv_store import KvStore
from .policy import SchedulerConfig, WaitingQueue, priority
from .choices import LabelJob, LabelPath, ScoreRows
from .prefix_cache import (MIN_SHARED_TOKENS, TOKEN_BYTES, Prefix, PrefixCache, common_prefix_length,
                           shared_start_lengths, shares_start, worth_caching)
from .reproducibility import Determinism
from .request import Call, Request, RequestStatus, free_sampler


class SlotHolder(Protocol):
    """What a step's slot decodes for: tokens[n_past:n_tokens] at position n_past in sequence seq, then a
    token sampled (sampler) or label rows scored (score), or neither."""

    seq: int
    tokens: object
    n_past: int
    n_tokens: int
    sampler: object
    score: Optional[ScoreRows]

    @property
    def gone(self) -> bool:
        """Its request ended while a step it was part of ran."""

    def calls(self, active: List[Optional[Request]]) -> Iterable[Call]:
        """The calls it works for (their statistics count its steps)."""

    def after_step(self, scheduler: "Scheduler", slot) -> bool:
        """Its tokens of a step are decoded (n_past counts them): True once it reached its next stop."""

    def restart(self, scheduler: "Scheduler") -> None:
        """A failed step left its sequence empty: it starts again from its beginning."""

    def fail(self, scheduler: "Scheduler", why: str) -> None:
        """It cannot be decoded even alone."""


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
    def __init__(self, ctx_handle, kv: KvStore, n_seq_max: int, n_slots: int, n_batch: int,
                 cache: Optional[PrefixCache], scratch_seqs: List[int], determinism: Optional[Determinism],
                 config: SchedulerConfig) -> None:
        """n_slots: every sequence of the context (prompts, cached runs, scratch), the most a step can hold."""
        self._ctx = ctx_handle
        self._kv = kv
        self._n_batch = n_batch
        self.config = config
        # llama.cpp splits a step into one pass over the weights per distinct number of tokens its sequences
        # carry (every sequence has a KV stream of its own): in a step of prefill alone, a small piece of a
        # prompt after another prompt's piece would cost a pass for little work, so it waits for a step with
        # more room. (Beside generated tokens the step has several passes anyway, and waiting only added
        # steps.)
        self._min_prefill_piece = n_batch // config.prefill_piece_divisor
        self.determinism = determinism
        self.cache = cache
        self._scratch_seqs = tuple(scratch_seqs)
        self._scratch = list(scratch_seqs)  # free sequences for LabelJobs (choices with multi-token labels)
        self._engine = engine()
        self._cv = self._engine.cv  # one lock for every context's scheduler: they share the engine thread
        self._incoming: List[Request] = []
        self._cancel_requested = False
        self._closing = False
        self._waiting = WaitingQueue(config)
        self._active: List[Optional[Request]] = [None] * n_seq_max  # by sequence id
        self._slots = ffi.new("newrllama_slot[]", n_slots)
        self._slot_holders: List[SlotHolder] = []
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
        if r.choice is not None and r.choice.waiting and (not self._scratch_seqs or r.choice.longest > self._n_batch):
            r.finish("error", "scoring labels needs a scratch sequence (a label and its end are decoded "
                              f"after the prompt) and labels of fewer than n_batch = {self._n_batch} tokens "
                              "(make n_batch larger than n_seq_max)")
            return False
        out = ffi.new("newrllama_sampler_handle *")  # NULL for choices: labels are scored, not sampled
        if r.choice is None and lib.newrllama_sampler_create_ex(self._ctx, r.c_params, r.seed, r.grammar, out,
                                                                self._err) != lib.NEWRLLAMA_OK:
            # Its grammar was checked when the call was prepared: what fails here is memory.
            r.finish("error", ffi.string(self._err[0]).decode("utf-8", "replace"), engine_error=True)
            return False
        r.start(seq, out[0], self._n_admitted)
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

    def let_go_of_prefix(self, r: Request) -> None:
        """The request decodes its whole prompt itself from now on (its copy is gone, or never came)."""
        if r.prefix is not None:
            self.cache.release(r.prefix)
            r.prefix = None
        r.n_cached = r.n_copied = 0
        r.n_past = 0

    def prefix_ready(self, p: Prefix) -> None:
        self.cache.prefix_ready(p)
        for r in self._active:
            if r is not None and r.prefix is p and r.awaiting_prefix:
                self._copy_prefix(r, p.n_tokens)

    def prefix_failed(self, p: Prefix) -> None:
        for r in self._active:
            if r is not None and r.prefix is p:
                self.let_go_of_prefix(r)
        self.cache.drop(p)

    def _take(self, holders: List[SlotHolder], h: SlotHolder, room: int) -> int:
        """Gives h the step's next slot: how many tokens it takes of room."""
        n = self._fill(len(holders), h, room)
        holders.append(h)
        return n

    def _fill(self, i: int, h: SlotHolder, room: int) -> int:
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
            score.write_to(s)
        return n

    def _build(self) -> bool:
        """Fills the slots: generating requests first, then label paths, runs being cached and prompts'
        prefill pieces. True if the step carries prompt tokens."""
        holders = self._slot_holders = []
        room = self._n_batch
        runs = self.cache.decoding() if self.cache is not None else []
        generating: List[Request] = []
        scoring: List[Request] = []
        prompts: List[Request] = []
        by_status = {RequestStatus.GENERATING: generating, RequestStatus.SCORING_LABELS: scoring,
                     RequestStatus.PREFILLING: prompts}
        for r in self._active:
            if r is not None:
                by_status.get(r.status, []).append(r)
        # As admitted (policy.priority: streams first, within a bound), then first come, first prefilled: in
        # sequence order, a prompt on a high sequence would wait while new prompts kept taking the lower ones.
        prompts.sort(key=lambda r: (priority(r, self._n_steps, self.config)[0], r.admitted))
        prefilling: List[SlotHolder] = [p for p in runs if p.users > 0] + prompts
        prefilling += [p for p in runs if p.users == 0]  # made ahead of their prompts: room left only
        for r in generating:
            room -= self._take(holders, r, room)
        room = self._add_label_jobs(scoring, holders, room)
        prefill = False
        min_piece = 0 if holders else self._min_prefill_piece
        for h in prefilling:
            if room <= 0:
                break
            if prefill and room < min(h.n_tokens - h.n_past, min_piece):
                continue
            room -= self._take(holders, h, room)
            prefill = True
        if self.cache is not None:
            own = sum(r.n_past - r.n_copied for r in self._active if r is not None)
            if room > 0 and self._waiting:
                free_cells = self.cache.n_cells - self.cache.n_cells_held() - own - (self._n_batch - room)
                for p in self._runs_ahead(room, free_cells):
                    room -= self._take(holders, p, room)
                    prefill = True
            self.cache.make_room(own + self._n_batch - room, self._n_batch - room)
        self._in_sequence_order(holders)
        return prefill

    def _in_sequence_order(self, holders: List[SlotHolder]) -> None:
        """Lays the step's slots out by sequence id: llama.cpp's passes take runs of consecutive sequences in
        batch order, so a generating prompt placed after the prefill pieces would cost a pass of its own."""
        order = sorted(range(len(holders)), key=lambda i: holders[i].seq)
        if all(i == j for j, i in enumerate(order)):
            return
        taken = [self._slots[i].n_tokens for i in order]
        holders[:] = [holders[i] for i in order]
        for j, h in enumerate(holders):
            self._fill(j, h, taken[j])

    def _runs_ahead(self, room: int, free_cells: int) -> List[Prefix]:
        """Room a step leaves goes to the runs that the next waiting prompts will start from (their starts
        shared with their call's other prompts), so that they are decoded by the time the prompts are
        admitted; runs whose tokens would not fit the free cells are left to be made at admission."""
        made: List[Prefix] = []
        for r in itertools.islice(self._waiting.in_order(self._n_steps), len(self._active)):
            if room <= 0:
                break
            if r.cancelled or r.runs_ahead or not r.shared:
                continue
            runs, r.runs_ahead = self.cache.prefetch(r.key, r.shared, free_cells)
            free_cells -= sum(p.n_tokens - p.n_inherited for p in runs)
            runs = [p for p in runs if not p.awaiting_parent]  # the others start when their parent is ready
            room -= sum(p.n_tokens - p.n_past for p in runs)
            made += runs
        return made

    def _add_label_jobs(self, scoring: List[Request], holders: List[SlotHolder], room: int) -> int:
        """Starts scoring the waiting label paths of the requests in scoring, as many as scratch sequences and
        room allow. llama.cpp cuts a step over a KV stream per sequence into passes of consecutive sequences
        that take equal numbers of tokens, each pass reading every weight: the longest bodies go on the lowest
        scratch sequences, so that the step's label paths take as many passes as the longest body has tokens."""
        picked: List[Tuple[Request, LabelPath]] = []
        for r in scoring:
            waiting = r.choice.waiting
            while waiting and len(picked) < len(self._scratch) and len(waiting[-1].body) <= room:
                picked.append((r, waiting.pop()))
                room -= len(picked[-1][1].body)
        picked.sort(key=lambda job: -len(job[1].body))
        for r, path in picked:
            job = LabelJob(r, path, self._scratch.pop(), r.n_tokens)
            self._kv.copy(r.seq, job.seq, -1)
            r.choice.running.append(job)
            self._take(holders, job, len(path.body))
        return room

    def end_label_job(self, job: LabelJob) -> None:
        self._kv.clear(job.seq)
        self._scratch.append(job.seq)
        self._scratch.sort(reverse=True)  # popped lowest first (see _add_label_jobs)
        job.owner.choice.running.remove(job)

    def _calls_of(self, holders: List[SlotHolder]) -> Iterable[Call]:
        return {id(c): c for h in holders for c in h.calls(self._active)}.values()

    def _advance(self, h: SlotHolder, n: int, slot) -> bool:
        """Records a holder's decoded tokens; True once it reached its next stop (a token, scores, a ready
        run) or it is gone (its request ended while this step ran for it)."""
        if h.gone:
            return True
        h.n_past += n
        return h.after_step(self, slot)

    def _step(self) -> float:
        prefill = self._build()
        holders = self._slot_holders
        if not holders:  # every admitted request waits for a run that has no room yet
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
                h.restart(self)
        if self._decode_code[0] == 1 and self.cache is not None and self.cache.evict_idle():
            return dt  # no free KV cells: idle cached runs are gone now, and the next step retries
        for call in calls:
            call.n_fallbacks += 1
        return dt + self._one_by_one(holders, self._decode_code[0])

    def _one_by_one(self, holders: List[SlotHolder], batch_code: int) -> float:
        """A batched step failed and was rolled back: decode each of its holders alone up to its
        next stop (a run: to its end), so that only one that cannot proceed on its own fails."""
        t_total = 0.0
        for h in holders:
            while not h.gone:
                n = self._fill(0, h, self._n_batch)
                t0 = time.perf_counter()
                code = lib.newrllama_step(self._ctx, self._slots, 1, self._decode_code, self._err)
                t_total += time.perf_counter() - t0
                for call in self._calls_of([h]):
                    call.n_decode_calls += 1
                if code != lib.NEWRLLAMA_OK:
                    if code != lib.NEWRLLAMA_ERROR_DECODE:
                        _lib.raise_for(code, self._err)
                    h.fail(self, f"llama_decode failed (code {self._decode_code[0]}; batched decode code {batch_code})")
                    break
                if self._advance(h, n, self._slots[0]):
                    break
        return t_total

    def first_label_tokens_scored(self, r: Request) -> None:
        r.choice.record_first()
        self._after_scores(r)

    def label_scored(self, job: LabelJob) -> None:
        job.add_scores(job.owner.choice.logprob)
        self.end_label_job(job)
        self._after_scores(job.owner)

    def _after_scores(self, r: Request) -> None:
        if r.choice.done:
            self.retire(r, "stop")
        elif r.cancelled:
            self.retire(r, "cancelled", "cancelled")

    def on_token(self, r: Request, token: int, is_eog: bool) -> None:
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
        if r.choice is not None:
            for job in list(r.choice.running):
                self.end_label_job(job)
        source = r.prefix
        if source is not None:
            self.cache.release(source)
            r.prefix = None
        if r.seq >= 0:
            if self.cache is not None and reason != "error" and r.n_past > 0:
                self.cache.keep(r.seq, ffi.buffer(r.tokens, r.n_past * TOKEN_BYTES)[:], source, r.n_copied)
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
        for seq in self._scratch_seqs:
            self._kv.clear(seq)
        self._scratch = list(self._scratch_seqs)
        if self.cache is not None:
            self.cache.clear()
        for r in pending:
            if closed:
                r.call.closed = True
            r.finish("error", message, engine_error=True)
