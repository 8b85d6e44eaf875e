"""Where a prompt's start comes from: the tie between the scheduler's requests and the prefix cache.

At admission a prompt copies the longest start that a cached run or a running prompt holds, or waits in its
sequence while a run it shares with other prompts is decoded as part of the steps; room a step leaves goes to the
runs of prompts still waiting for a sequence; when a prompt ends, its hold on the run it copied goes and what its
sequence decoded stays cached. This class is the only writer of a request's prefix fields (shared, runs_ahead,
prefix, n_copied, n_cached) and of its n_past when a start is copied in or lost; the scheduler calls it on
admission, on the events of runs and cleared prompts, and when a prompt ends (docs/design/layers.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

from ..kv.prefix_cache import MIN_SHARED_TOKENS, Prefix, PrefixCache, common_prefix_length, shared_start_lengths, \
    shares_start, worth_caching
from .request import Request

if TYPE_CHECKING:  # the C library's side; the bookkeeping here only calls it
    from ..kv.kv_store import KvStore


class PromptPrefixes:
    def __init__(self, cache: Optional[PrefixCache], kv: "KvStore") -> None:
        self.cache = cache  # None: every prompt decodes its whole prompt itself
        self._kv = kv

    def admitted(self, admitted: List[Request], active: List[Optional[Request]]) -> None:
        """Prompts just given sequences, from any callers, take the starts they share with each other into
        account, then copy (or wait for) the longest start the cache or a running prompt holds."""
        if self.cache is None:
            return
        if len(admitted) > 1:
            for r, lengths in zip(admitted, shared_start_lengths([r.key for r in admitted])):
                if lengths:
                    r.shared = worth_caching(r.shared + lengths, r.n_prompt - 1)
        for r in admitted:
            self._attach(r, active)

    def _attach(self, r: Request, active: List[Optional[Request]]) -> None:
        running_seq, n_running = self._running_start(r, active)
        prefix, n = self.cache.lookup(r.key, r.shared, (running_seq, n_running))
        if prefix is not None:
            r.prefix = prefix
            if prefix.ready:
                self._copy(r, n)
        elif n > 0:  # the running prompt decoded these tokens itself
            self._kv.copy(running_seq, r.seq, n)
            r.n_past = r.n_copied = r.n_cached = n

    def _running_start(self, r: Request, active: List[Optional[Request]]) -> Tuple[int, int]:
        """The running prompt whose decoded cells give r the longest start (its sequence, how many tokens)."""
        best_seq, best_n = -1, 0
        limit = r.n_prompt - 1
        for d in active:
            if d is None or d is r:
                continue
            n = min(d.n_past, d.n_prompt, limit)
            if (n < MIN_SHARED_TOKENS or n <= best_n or not self.cache.can_cut(d.n_past)
                    or not shares_start(r.key, d.key, max(best_n + 1, MIN_SHARED_TOKENS))):
                continue
            best_seq, best_n = d.seq, min(n, common_prefix_length(r.key, d.key))
        return best_seq, best_n

    def _copy(self, r: Request, n: int) -> None:
        self._kv.copy(r.prefix.seq, r.seq, n)
        r.n_past = r.n_copied = n
        r.n_cached = n - PrefixCache.charge(r.prefix, n)

    def let_go(self, r: Request) -> None:
        """The request decodes its whole prompt itself from now on (its copy is gone, or never came)."""
        if r.prefix is not None:
            self.cache.release(r.prefix)
            r.prefix = None
        r.n_cached = r.n_copied = 0
        r.n_past = 0

    def run_ready(self, p: Prefix, active: List[Optional[Request]]) -> None:
        self.cache.prefix_ready(p)
        for r in active:
            if r is not None and r.prefix is p and r.awaiting_prefix:
                self._copy(r, p.n_tokens)

    def run_failed(self, p: Prefix, active: List[Optional[Request]]) -> None:
        for r in active:
            if r is not None and r.prefix is p:
                self.let_go(r)
        self.cache.drop(p)

    def ending(self, r: Request, keep: bool) -> None:
        """r ends, still holding its sequence or not: its hold on the run it copied goes, and with keep what its
        sequence decoded stays cached."""
        source = r.prefix
        if source is not None:
            self.cache.release(source)
            r.prefix = None
        if keep and self.cache is not None and r.seq >= 0 and r.n_past > 0:
            self.cache.keep(r.seq, r.tokens[:r.n_past].tobytes(), source, r.n_copied)

    def cancelled_while_waiting(self, waiting: Iterable[Request]) -> None:
        """Prompts left the queue: runs made ahead for them go, and the other waiting prompts' are made again."""
        if self.cache is None:
            return
        self.cache.drop_unclaimed()
        for r in waiting:
            r.runs_ahead = False

    def make_ahead(self, r: Request, free_cells: int) -> List[Prefix]:
        """The runs a waiting prompt will start from, made now in room a step leaves (see PrefixCache.prefetch)."""
        runs, r.runs_ahead = self.cache.prefetch(r.key, r.shared, free_cells)
        return runs
