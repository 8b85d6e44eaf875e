"""The scheduler: one engine thread owns a context and runs every caller's prompts in one batch.

Callers (generate_parallel, generate, stream, from any thread) hand it Requests and
wait; the engine thread admits waiting requests to free sequences as soon as one
is free (continuous batching), builds each step (one token for every generating
request, then prefill chunks in the room left in n_batch), and runs it with one C
call (newrllama_step: decode, then sample every request that wants a token). The
policy lives here: admission, stop strings, max_tokens, cancellation, the fallback
to decoding requests one at a time when a batched step fails, statistics. Its
Python cost is per event (an admitted prompt, a sampled token), not per vocabulary
entry; EngineStats.python_us_per_step measures it."""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import Deque, List, Optional

from . import _lib
from ._lib import ffi, lib
from .errors import ClosedError
from .request import Call, Request, free_sampler


@dataclass(frozen=True)
class EngineStats:
    """Figures of a context's engine thread since the context was made."""

    n_steps: int
    t_step_s: float     # inside newrllama_step (decode and sampling, in C)
    t_python_s: float   # the scheduler's own work around the steps

    @property
    def python_us_per_step(self) -> float:
        return 1e6 * self.t_python_s / self.n_steps if self.n_steps else 0.0


class Scheduler:
    def __init__(self, ctx_handle, n_seq_max: int, n_batch: int) -> None:
        self._ctx = ctx_handle
        self._n_batch = n_batch
        self._cv = threading.Condition()
        self._incoming: List[Request] = []
        self._cancel_requested = False
        self._closing = False
        self._waiting: Deque[Request] = collections.deque()
        self._active: List[Optional[Request]] = [None] * n_seq_max  # by sequence id
        self._slots = ffi.new("newrllama_slot[]", n_seq_max)
        self._slot_requests: List[Request] = []
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
        return EngineStats(self._n_steps, self._t_step, self._t_python)

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
                out = ffi.new("newrllama_sampler_handle *")
                if lib.newrllama_sampler_create(self._ctx, r.c_params, r.seed, out, self._err) != lib.NEWRLLAMA_OK:
                    r.finish("error", ffi.string(self._err[0]).decode("utf-8", "replace"))
                    continue
                r.start(seq, out[0])
                self._active[seq] = r
                break

    def _fill(self, i: int, r: Request, room: int) -> int:
        left = r.n_tokens - r.n_past
        n = left if left < room else room
        s = self._slots[i]
        s.seq_id = r.seq
        s.pos = r.n_past
        s.tokens = r.tokens + r.n_past
        s.n_tokens = n
        s.sampler = r.sampler if n == left else ffi.NULL
        return n

    def _build(self) -> bool:
        """Fills the slots: generating requests first, then prefill chunks. True if it carries prompt tokens."""
        requests = self._slot_requests = []
        room = self._n_batch
        prefill = False
        for r in self._active:
            if r is not None and r.n_tokens - r.n_past == 1:
                room -= self._fill(len(requests), r, room)
                requests.append(r)
        for r in self._active:
            if room <= 0:
                break
            if r is not None and r.n_tokens - r.n_past > 1:
                room -= self._fill(len(requests), r, room)
                requests.append(r)
                prefill = True
        return prefill

    def _step(self) -> float:
        prefill = self._build()
        requests = self._slot_requests
        t0 = time.perf_counter()
        code = lib.newrllama_step(self._ctx, self._slots, len(requests), self._decode_code, self._err)
        dt = time.perf_counter() - t0
        self._n_steps += 1
        self._t_step += dt
        calls = {id(r.call): r.call for r in requests}.values()
        for call in calls:
            call.n_decode_calls += 1
            if prefill:
                call.t_prompt_s += dt
            else:
                call.t_gen_s += dt
        if code == lib.NEWRLLAMA_OK:
            for i, r in enumerate(requests):
                s = self._slots[i]
                r.n_past += s.n_tokens
                if s.sampler != ffi.NULL:
                    self._on_token(r, s.token, s.is_eog)
            return dt
        if code != lib.NEWRLLAMA_ERROR_DECODE:
            _lib.raise_for(code, self._err)
        for call in calls:
            call.n_fallbacks += 1
        return dt + self._one_by_one(requests, self._decode_code[0])

    def _one_by_one(self, requests: List[Request], batch_code: int) -> float:
        """A batched step failed and was rolled back: decode each of its requests alone up to its
        next token, so that only a request that cannot proceed on its own fails."""
        for i, r in enumerate(requests):
            if self._slots[i].status == lib.NEWRLLAMA_SLOT_CLEARED:
                r.n_past = 0
        t_total = 0.0
        for r in requests:
            while True:
                n = self._fill(0, r, self._n_batch)
                t0 = time.perf_counter()
                code = lib.newrllama_step(self._ctx, self._slots, 1, self._decode_code, self._err)
                t_total += time.perf_counter() - t0
                r.call.n_decode_calls += 1
                if code != lib.NEWRLLAMA_OK:
                    if code != lib.NEWRLLAMA_ERROR_DECODE:
                        _lib.raise_for(code, self._err)
                    self._retire(r, "error", f"llama_decode failed for this prompt (code {self._decode_code[0]}; "
                                             f"batched decode code {batch_code})")
                    break
                r.n_past += n
                s = self._slots[0]
                if s.sampler != ffi.NULL:
                    self._on_token(r, s.token, s.is_eog)
                    break
        return t_total

    def _on_token(self, r: Request, token: int, is_eog: bool) -> None:
        reason = r.accept(token, is_eog)
        if reason is not None:
            self._retire(r, reason)
        elif r.cancelled:
            self._retire(r, "cancelled", "cancelled")

    def _retire(self, r: Request, reason, error: Optional[str] = None) -> None:
        """Ends an admitted request: frees its sampler and its sequence, then reports the result."""
        free_sampler(r)
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
        for r in pending:
            if closed:
                r.call.closed = True
            r.finish("error", message)
