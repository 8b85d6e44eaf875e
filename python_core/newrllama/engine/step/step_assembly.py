"""The assembly of one step: which holders it takes, how many tokens each, and the order of its slots.

A step's slots (the C array newrllama_step reads) are filled for holders of three kinds (a Request,
a cached run being decoded, a label path being scored), which share one interface: SlotHolder.
Generating prompts take a token each first, then label paths, runs being cached and prompts'
prefill pieces share the room left in n_batch; the slots are then laid out by sequence id, and run() makes the
step's one C call (docs/design/layers.md, "A step")."""
from __future__ import annotations

import itertools
from array import array
from typing import Iterable, List, Optional, Protocol

from ... import _lib
from ..._lib import ffi, lib
from .choices import ScoreRows
from .label_flow import LabelFlow
from ..policy import SchedulerConfig, WaitingQueue, priority
from ..kv.prefix_cache import Prefix
from .prompt_prefixes import PromptPrefixes
from .request import Call, Request, RequestStatus
from .step_events import StepEvent


class SlotHolder(Protocol):
    """What a step's slot decodes for: tokens[n_past:n_tokens] at position n_past in sequence seq, then a
    token sampled (sampler) or label rows scored (score), or neither."""

    seq: int
    tokens: array
    n_past: int
    n_tokens: int
    sampler: object  # a C sampler, or None
    score: Optional[ScoreRows]

    @property
    def gone(self) -> bool:
        """Its request ended while a step it was part of ran."""

    def calls(self, active: List[Optional[Request]]) -> Iterable[Call]:
        """The calls it works for (their statistics count its steps)."""

    def after_step(self, slot) -> Optional[StepEvent]:
        """Its tokens of a step are decoded (n_past counts them): what happened once it reached its next stop,
        None before."""

    def cleared(self) -> StepEvent:
        """A failed step left its sequence empty."""

    def failed(self, why: str) -> StepEvent:
        """It cannot be decoded even alone."""


# llama_decode's code for a step whose tokens found no free KV cells (the step was rolled back).
NO_KV_ROOM = 1


class StepAssembly:
    def __init__(self, n_slots: int, n_batch: int, config: SchedulerConfig, prefixes: PromptPrefixes,
                 labels: LabelFlow) -> None:
        """n_slots: every sequence of the context (prompts, cached runs, scratch), the most a step can hold."""
        self.slots = ffi.new("newrllama_slot[]", n_slots)
        self._decode_code = ffi.new("int32_t *")
        self._err = _lib.new_error_slot()
        self.holders: List[SlotHolder] = []
        # What each slot's pointers point into, lent to C for the step: the holders' arrays stay Python's.
        self._lent: List[tuple] = [()] * n_slots
        self._n_batch = n_batch
        self._config = config
        self._prefixes = prefixes
        self._labels = labels
        # llama.cpp splits a step into one pass over the weights per distinct number of tokens its sequences
        # carry (every sequence has a KV stream of its own): in a step of prefill alone, a small piece of a
        # prompt after another prompt's piece would cost a pass for little work, so it waits for a step with
        # more room. (Beside generated tokens the step has several passes anyway, and waiting only added
        # steps.)
        self._min_prefill_piece = n_batch // config.prefill_piece_divisor

    def build(self, active: List[Optional[Request]], waiting: WaitingQueue, n_steps: int) -> bool:
        """Fills the slots: generating requests first, then label paths, runs being cached and prompts'
        prefill pieces. True if the step carries prompt tokens."""
        holders = self.holders = []
        room = self._n_batch
        cache = self._prefixes.cache
        runs = cache.decoding() if cache is not None else []
        generating: List[Request] = []
        scoring: List[Request] = []
        prompts: List[Request] = []
        by_status = {RequestStatus.GENERATING: generating, RequestStatus.SCORING_LABELS: scoring,
                     RequestStatus.PREFILLING: prompts}
        for r in active:
            if r is not None:
                by_status.get(r.status, []).append(r)
        # As admitted (policy.priority: streams first, within a bound), then first come, first prefilled: in
        # sequence order, a prompt on a high sequence would wait while new prompts kept taking the lower ones.
        prompts.sort(key=lambda r: (priority(r, n_steps, self._config)[0], r.admitted))
        prefilling: List[SlotHolder] = [p for p in runs if p.users > 0] + prompts
        prefilling += [p for p in runs if p.users == 0]  # made ahead of their prompts: room left only
        for r in generating:
            room -= self.take(r, room)
        for job in self._labels.start_jobs(scoring, room):
            room -= self.take(job, room)
        prefill = False
        min_piece = 0 if holders else self._min_prefill_piece
        for h in prefilling:
            if room <= 0:
                break
            if prefill and room < min(h.n_tokens - h.n_past, min_piece):
                continue
            room -= self.take(h, room)
            prefill = True
        if cache is not None:
            own = sum(r.n_past - r.n_copied for r in active if r is not None)
            if room > 0 and waiting:
                free_cells = cache.n_cells - cache.n_cells_held() - own - (self._n_batch - room)
                for p in self._runs_ahead(waiting, n_steps, len(active), room, free_cells):
                    room -= self.take(p, room)
                    prefill = True
            cache.make_room(own + self._n_batch - room, self._n_batch - room)
        self._in_sequence_order()
        return prefill

    def run(self, ctx_handle, n: int) -> Optional[int]:
        """The step of the first n slots, in one C call (capi_shim/newrllama_step.c): None once it is decoded and
        sampled, else llama_decode's code for a step that failed and was rolled back (see cleared())."""
        code = lib.newrllama_step(ctx_handle, self.slots, n, self._decode_code, self._err)
        if code == lib.NEWRLLAMA_OK:
            return None
        if code != lib.NEWRLLAMA_ERROR_DECODE:
            _lib.raise_for(code, self._err)
        return self._decode_code[0]

    def cleared(self, i: int) -> bool:
        """Whether the failed step left slot i's sequence empty rather than rolled back (sliding-window cells)."""
        return self.slots[i].status == lib.NEWRLLAMA_SLOT_CLEARED

    def take(self, h: SlotHolder, room: int) -> int:
        """Gives h the step's next slot: how many tokens it takes of room."""
        n = self.fill(len(self.holders), h, room)
        self.holders.append(h)
        return n

    def fill(self, i: int, h: SlotHolder, room: int) -> int:
        left = h.n_tokens - h.n_past
        n = left if left < room else room
        s = self.slots[i]
        tokens = ffi.from_buffer("int32_t[]", h.tokens)
        s.seq_id = h.seq
        s.pos = h.n_past
        s.tokens = tokens + h.n_past
        s.n_tokens = n
        s.sampler = h.sampler if n == left and h.sampler is not None else ffi.NULL
        score = h.score if n == left else None
        if score is None:
            s.n_score_rows = 0
            self._lent[i] = (tokens,)
        else:
            t = score.targets
            lent = (tokens, ffi.from_buffer("int32_t[]", t.tokens), ffi.from_buffer("int32_t[]", t.rows),
                    ffi.from_buffer("float[]", score.logprobs))
            s.n_score_rows, s.n_targets, s.targets, s.target_rows, s.logprobs = t.n_rows, t.n, *lent[1:]
            self._lent[i] = lent
        return n

    def _in_sequence_order(self) -> None:
        """Lays the step's slots out by sequence id: llama.cpp's passes take runs of consecutive sequences in
        batch order, so a generating prompt placed after the prefill pieces would cost a pass of its own."""
        holders = self.holders
        order = sorted(range(len(holders)), key=lambda i: holders[i].seq)
        if all(i == j for j, i in enumerate(order)):
            return
        taken = [self.slots[i].n_tokens for i in order]
        holders[:] = [holders[i] for i in order]
        for j, h in enumerate(holders):
            self.fill(j, h, taken[j])

    def _runs_ahead(self, waiting: WaitingQueue, n_steps: int, n_seqs: int, room: int,
                    free_cells: int) -> List[Prefix]:
        """Room a step leaves goes to the runs that the next waiting prompts will start from (their starts
        shared with their call's other prompts), so that they are decoded by the time the prompts are
        admitted; runs whose tokens would not fit the free cells are left to be made at admission."""
        made: List[Prefix] = []
        for r in itertools.islice(waiting.in_order(n_steps), n_seqs):
            if room <= 0:
                break
            if r.cancelled or r.runs_ahead or not r.shared:
                continue
            runs = self._prefixes.make_ahead(r, free_cells)
            free_cells -= sum(p.n_tokens - p.n_inherited for p in runs)
            runs = [p for p in runs if not p.awaiting_parent]  # the others start when their parent is ready
            room -= sum(p.n_tokens - p.n_past for p in runs)
            made += runs
        return made
