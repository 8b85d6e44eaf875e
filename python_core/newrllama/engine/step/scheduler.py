"""The scheduler of a context: the policy, in one place. It runs every caller's prompts in one batch on the
process's engine thread (engine_thread.py), the only thread that decodes: admission, cancellation, the step and
the fallback to one holder at a time when a batched step fails, acting on what each step did. The flow of a step,
who owns what and where the C library is called: docs/design/layers.md, "A step"."""
from __future__ import annotations

import time
from typing import Iterable, List, Optional

from .engine_thread import engine
from ...errors import ClosedError
from ..kv.kv_store import KvStore
from .label_flow import LabelFlow
from ..policy import SchedulerConfig, WaitingQueue
from ..kv.prefix_cache import PrefixCache
from .prompt_prefixes import PromptPrefixes
from ..llama.reproducibility import Determinism
from .results import EngineStats
from ..kv.sequence_layout import SequenceLayout
from .request import Call, Request
from .samplers import SamplerError, free_sampler, new_sampler
from .step_assembly import NO_KV_ROOM, SlotHolder, StepAssembly
from .step_events import (FirstTokensScored, LabelPathCleared, LabelPathFailed, LabelPathScored, PromptCleared,
                          PromptFailed, PrefixCleared, PrefixFailed, PrefixReady, StepEvent, TokenSampled)


class Scheduler:
    def __init__(self, ctx_handle, kv: KvStore, layout: SequenceLayout, cache: Optional[PrefixCache],
                 determinism: Optional[Determinism], config: SchedulerConfig) -> None:
        self._ctx = ctx_handle
        self._kv = kv
        self._n_batch = layout.n_batch
        self.config = config
        self.determinism = determinism
        self.cache = cache
        self.prefixes = PromptPrefixes(cache, kv)
        self.labels = LabelFlow(kv, layout.scratch_seqs, layout.n_batch)
        self.assembly = StepAssembly(layout.n_sequences, layout.n_batch, config, self.prefixes, self.labels)
        self._engine = engine()
        self._cv = self._engine.cv  # one lock for every context's scheduler: they share the engine thread
        self._incoming: List[Request] = []
        self._cancel_requested = False
        self._closing = False
        self._waiting = WaitingQueue(config)
        self._active: List[Optional[Request]] = [None] * layout.n_seq  # by sequence id
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
        if cancelled:
            self.prefixes.cancelled_while_waiting(self._waiting)
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
        self.prefixes.admitted(admitted, self._active)

    def _start(self, r: Request, seq: int) -> bool:
        """Gives a waiting request sequence seq; False if it ended instead (cancelled, or it cannot run)."""
        if r.cancelled:
            r.finish("cancelled", "cancelled")
            return False
        refusal = self.labels.refusal(r)
        if refusal is not None:
            r.finish("error", refusal)
            return False
        try:  # for choices, none: labels are scored, not sampled
            sampler = new_sampler(self._ctx, r) if r.choice is None else None
        except SamplerError as exc:
            r.finish("error", str(exc), engine_error=True)
            return False
        r.start(seq, sampler, self._n_admitted)
        self._n_admitted += 1
        self._active[seq] = r
        return True

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
        failed = self.assembly.run(self._ctx, len(holders))
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
        if failed is None:
            for i, h in enumerate(holders):
                self._advance(h, slots[i].n_tokens, slots[i])
            return dt
        for i, h in enumerate(holders):
            if self.assembly.cleared(i):
                self.act(h.cleared())
        if failed == NO_KV_ROOM and self.cache is not None and self.cache.evict_idle():
            return dt  # no free KV cells: idle cached runs are gone now, and the next step retries
        for call in calls:
            call.n_fallbacks += 1
        return dt + self._one_by_one(holders, failed)

    def _one_by_one(self, holders: List[SlotHolder], batch_code: int) -> float:
        """A batched step failed and was rolled back: decode each of its holders alone up to its
        next stop (a run: to its end), so that only one that cannot proceed on its own fails."""
        t_total = 0.0
        slots = self.assembly.slots
        for h in holders:
            while not h.gone:
                n = self.assembly.fill(0, h, self._n_batch)
                t0 = time.perf_counter()
                failed = self.assembly.run(self._ctx, 1)
                t_total += time.perf_counter() - t0
                for call in self._calls_of([h]):
                    call.n_decode_calls += 1
                if failed is not None:
                    self.act(h.failed(f"llama_decode failed (code {failed}; batched decode code {batch_code})"))
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
        elif isinstance(event, PrefixReady):
            self.prefixes.run_ready(event.prefix, self._active)
        elif isinstance(event, PromptCleared):
            self.prefixes.let_go(event.request)
        elif isinstance(event, PrefixCleared):
            self.cache.restart(event.prefix)
        elif isinstance(event, LabelPathCleared):
            self.labels.path_cleared(event.job)
        elif isinstance(event, PromptFailed):
            self.retire(event.request, "error", event.why, engine_error=True)
        elif isinstance(event, LabelPathFailed):
            self.retire(event.job.owner, "error", event.why, engine_error=True)
        elif isinstance(event, PrefixFailed):
            self.prefixes.run_failed(event.prefix, self._active)
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
        self.prefixes.ending(r, keep=reason != "error")
        if r.seq >= 0:
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

