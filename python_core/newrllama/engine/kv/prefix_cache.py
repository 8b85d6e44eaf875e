"""Cached token runs: a prompt's start that the engine decoded before is copied, not decoded again.

The cache holds runs of tokens, each in a cache sequence of its own (ids after the
prompt sequences), never extended or rewound once decoded: gemma 3's sliding-window
layers may reuse the cells of a sequence's old positions, so only a run's end is
always a safe place to continue from. A run that never reached past the window may
also be cut: a prompt may take its first tokens only.

Runs come from three places, so that prompts share their starts whatever call,
thread, request or stream they came from:
- shared starts: where several prompts waiting together (of one call, or admitted to
  the batch in one round from any callers) share a start of at least
  MIN_SHARED_TOKENS tokens, that start is made a run, decoded once as part of the
  steps while the prompts wait for it; runs nest (an instruction, then each text after
  it) and a nested run copies its parent and decodes only its own rest; where a step
  has room left, the runs of the next prompts still waiting for a sequence are made
  and decoded ahead of them (in place of idle runs, never of others made ahead), so a
  text's questions find its run ready when they are admitted;
- finished prompts: what a prompt decoded (its prompt and answer) is kept when it
  ends, for a later prompt that starts with it (the next turn of a chat, a lone
  request with an instruction seen a moment ago);
- running prompts (the scheduler offers them): a prompt admitted while another one
  that starts the same way is running copies the cells that one has decoded so far.

Runs are evicted least recently used when a cache sequence is needed, never while a
prompt waits for them, and a finished prompt's run displaces only another kept run (a
run made for shared starts may serve prompts of its call still waiting); and an idle run
(no prompt holds it) is evicted once the steps have fed a number of tokens since it was
last used, so that the runs of a workload that has moved on make way for the next one's
kept runs. A run's age counts tokens fed, not time or steps of generation, so runs
survive pauses and the gaps between a chat's turns. Runs made for shared starts stay
SchedulerConfig.idle_batches x n_batch tokens. For runs kept from finished prompts, which
only some workloads reuse, the limit adapts: it falls by a quarter whenever one is
evicted unused (used by no prompt beyond the run it copied; for waiting too long, or to
make way for another run), and doubles whenever a prompt arrives that a run evicted
unused would have served with MIN_SHARED_TOKENS tokens more than it got (the cache
remembers the last SchedulerConfig.ghosts of them), between n_batch / 8 and 64 x n_batch.
Growing faster than it falls, it learns to hold runs in a workload that comes back to
each prompt after a few others, where each miss follows an unused eviction. Every
sequence has a KV stream of its own, so the cells a run holds cost memory (allocated
with the context) but no time in other sequences' steps. Every method runs on the
engine thread except the pure functions that find shared starts, which callers run in
their own thread; the KV operations go through a KvStore (kv_store.py), so that the
policy is tested without a model.

Token accounting: a run made for waiting prompts is decoded on their behalf, so the
first prompt that copies it is charged with those tokens (they are not "cached" for
it); every later prompt gets them as cached tokens.
"""
from __future__ import annotations

import enum
from array import array
from dataclasses import dataclass
from collections import deque
from typing import TYPE_CHECKING, Deque, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..policy import SchedulerConfig
from .sequence_layout import SequenceLayout

if TYPE_CHECKING:  # the C library's side; the bookkeeping here only calls it
    from .kv_store import KvStore

# Shorter shared starts are decoded with each prompt: caching them would cost a
# cache sequence and a step of waiting for less than it saves. A run costs one
# cache sequence and a copy that moves no cells, so a few tokens are worth it: the
# wording of a codebook's question, shared by the orders its labels are listed in,
# is more than 8 tokens but fewer than 32, and caching it made questions about Reuters
# stories faster than a floor of 32 tokens did (bench/bench_questions.py, its results in
# bench/results/questions-*.json: docs/benchmarks.md, "Several questions per text").
MIN_SHARED_TOKENS = 8
# A token key holds llama_token (int32_t) values laid out as in C, so a sequence's C buffer is a key too.
TOKEN_BYTES = 4
TOKEN_TYPECODE = "i" if array("i").itemsize == TOKEN_BYTES else "l"


def token_key(tokens: Sequence[int]) -> bytes:
    """A run of tokens as the bytes of its int32s. The engine thread tests every cached run against each
    admitted prompt: on bytes a test is one memcmp and a slice copies no objects (where on lists of ints
    it compares and copies one object per token), and a run's key hashes once."""
    return array(TOKEN_TYPECODE, tokens).tobytes()


def n_tokens_of(key: bytes) -> int:
    return len(key) // TOKEN_BYTES


def shares_start(a: bytes, b: bytes, n: int) -> bool:
    """Whether a and b both start with the same n tokens."""
    end = n * TOKEN_BYTES
    return len(a) >= end and len(b) >= end and a[:end] == b[:end]


def common_prefix_length(a: bytes, b: bytes) -> int:
    """How many tokens a and b share at their start (bisection over slice comparisons, which run in C)."""
    lo, hi = 0, min(len(a), len(b)) // TOKEN_BYTES
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid * TOKEN_BYTES] == b[:mid * TOKEN_BYTES]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def worth_caching(lengths: Iterable[int], limit: int) -> Tuple[int, ...]:
    """The lengths (at most ``limit``), shortest first, each MIN_SHARED_TOKENS longer than the one before."""
    kept: List[int] = []
    for length in sorted({min(n, limit) for n in lengths}):
        if length - (kept[-1] if kept else 0) >= MIN_SHARED_TOKENS:
            kept.append(length)
    return tuple(kept)


def shared_start_lengths(prompts: Sequence[bytes]) -> List[Tuple[int, ...]]:
    """For every prompt (a token key), the lengths of the starts it shares with other prompts, shortest first.

    They are the depths at which the prompts' token trie branches on the prompt's path
    (an instruction all share, then a text that some share), found as the intervals of
    the sorted prompts' common-prefix lengths; each is capped one token short of the
    prompt (a prompt decodes at least its last token to be answered)."""
    n = len(prompts)
    order = sorted(range(n), key=prompts.__getitem__)
    depths: List[List[int]] = [[] for _ in range(n)]
    open_runs: List[Tuple[int, int]] = []  # (shared length, first sorted position), lengths rising
    for j in range(1, n + 1):
        lcp = common_prefix_length(prompts[order[j - 1]], prompts[order[j]]) if j < n else -1
        first = j - 1
        while open_runs and open_runs[-1][0] > lcp:
            length, first = open_runs.pop()
            for k in range(first, j):
                depths[order[k]].append(length)
        if lcp >= MIN_SHARED_TOKENS and (not open_runs or open_runs[-1][0] < lcp):
            open_runs.append((lcp, first))
    return [worth_caching(d, n_tokens_of(prompts[i]) - 1) for i, d in enumerate(depths)]


class PrefixState(enum.Enum):
    """Where a cached prefix is (Prefix.state)."""

    AWAITING_PARENT = "awaiting parent"  # it will copy its parent's cells once the parent is decoded
    DECODING = "decoding"                # the steps decode its own tokens
    READY = "ready"                      # decoded: prompts copy it


class Prefix:
    """A cached run: its tokens, its cache sequence, and how much of it is decoded.

    It is filled into steps like a prompt that wants no output (same field names). One
    that starts with another cached run (its ``parent``) copies the parent's first
    ``n_inherited`` tokens when the parent is ready, and decodes only the rest."""

    __slots__ = ("key", "tokens", "n_tokens", "n_past", "seq", "sampler", "score", "users", "last_used",
                 "parent", "n_inherited", "awaiting_parent", "uncharged", "fed_mark", "kept", "reused", "ahead")

    def __init__(self, key: bytes, seq: int) -> None:
        self.key = key
        self.n_tokens = n_tokens_of(key)
        self.tokens = array(TOKEN_TYPECODE, key)
        self.n_past = 0
        self.seq = seq
        self.sampler = None
        self.score = None
        self.users = 0      # admitted prompts (and runs) that copied it or wait for it
        self.last_used = 0
        self.fed_mark = 0   # tokens fed by the steps when it was last used
        self.parent: Optional["Prefix"] = None
        self.n_inherited = 0
        self.awaiting_parent = False
        self.uncharged = 0  # tokens decoded for it that no prompt has been charged with yet
        self.kept = False   # kept from a finished prompt (not made for waiting ones)
        self.reused = False  # a prompt copied it since it was kept
        self.ahead = False   # made for a waiting prompt, before any prompt took it

    @property
    def ready(self) -> bool:
        return self.n_past == self.n_tokens

    @property
    def state(self) -> PrefixState:
        if self.awaiting_parent:
            return PrefixState.AWAITING_PARENT
        return PrefixState.READY if self.ready else PrefixState.DECODING

    # ---- as the holder of a step slot (see scheduler.py) ----

    @property
    def gone(self) -> bool:
        return False

    def calls(self, active) -> List[object]:
        """It works for the calls whose prompts wait for it."""
        return [r.call for r in active if r is not None and r.prefix is self]

    def after_step(self, slot) -> Optional["PrefixReady"]:
        return PrefixReady(self) if self.ready else None

    def cleared(self) -> "PrefixCleared":
        return PrefixCleared(self)

    def failed(self, why: str) -> "PrefixFailed":
        return PrefixFailed(self)


# What a step did for a cached run (step_events.py gathers every holder's events).
@dataclass(frozen=True)
class PrefixReady:
    """A cached run is decoded to its end: the prompts waiting for it can copy it."""

    prefix: Prefix


@dataclass(frozen=True)
class PrefixCleared:
    """A failed step left a cached run's sequence empty: it is decoded again from its start."""

    prefix: Prefix


@dataclass(frozen=True)
class PrefixFailed:
    """A cached run cannot be decoded even alone: its prompts decode their starts themselves."""

    prefix: Prefix


PrefixEvent = Union[PrefixReady, PrefixCleared, PrefixFailed]


class PrefixCache:
    def __init__(self, kv: KvStore, layout: SequenceLayout, config: SchedulerConfig) -> None:
        self._kv = kv
        first_seq, n_batch = layout.first_cache_seq, layout.n_batch
        self._free_seqs = list(range(first_seq + layout.n_seq_cache - 1, first_seq - 1, -1))
        self._n_swa = layout.n_swa
        self.n_cells = layout.n_cells
        self._entries: Dict[bytes, Prefix] = {}  # by key
        self._clock = 0
        self._fed = 0
        self._idle_tokens = config.idle_batches * n_batch
        self._kept_idle_bounds = (max(1, n_batch // 8), 64 * n_batch)
        self.kept_idle_tokens = self._idle_tokens
        self._ghosts: Deque[bytes] = deque(maxlen=config.ghosts)
        self.n_evictions = 0

    @property
    def entries(self) -> List[Prefix]:
        return list(self._entries.values())

    def decoding(self) -> List[Prefix]:
        return [p for p in self._entries.values() if p.state is PrefixState.DECODING]

    def n_cells_held(self) -> int:
        """An upper bound of the cells the runs hold (cells shared with prompts count here only; cells a
        run copied from a parent still cached count once, with the parent)."""
        return sum(p.n_past - (p.n_inherited if p.parent is not None and self._holds(p.parent) else 0)
                   for p in self._entries.values())

    def _holds(self, p: Prefix) -> bool:
        return self._entries.get(p.key) is p

    def can_cut(self, n_decoded: int) -> bool:
        """Whether a sequence that decoded n_decoded tokens still holds every cell of its first ones: past the
        sliding window, the first cells may have been reused for later positions."""
        return self._n_swa == 0 or n_decoded < self._n_swa

    def _touch(self, p: Prefix) -> None:
        self._clock += 1
        p.last_used = self._clock
        p.fed_mark = self._fed

    def lookup(self, prompt: bytes, shared: Sequence[int] = (),
               running: Tuple[int, int] = (-1, 0)) -> Tuple[Optional[Prefix], int]:
        """The run a prompt (a token key) should start from, and how many of its tokens to take.

        ``running`` is the best start a running prompt can give (its sequence, how many
        tokens). ``shared`` holds the start lengths worth caching, shortest first; for
        each that nothing found serves (nearly), a run is made (to be decoded, unless the
        cache has no room), each starting from the one before. A prompt keeps at least its
        last token to decode. (None, n > 0): copy n tokens from the running prompt."""
        start = prompt[:-TOKEN_BYTES]
        best, best_n = self._longest_start(start)
        self._learn_from_ghosts(start, best_n)
        running_seq, running_n = running
        if running_n > best_n:
            best, best_n = None, running_n
        for length in shared:
            if length - best_n < MIN_SHARED_TOKENS:
                continue
            made = self._make(prompt[:length * TOKEN_BYTES], best, best_n, running_seq if best is None else -1)
            if made is None:
                break
            best, best_n = made, length
        if best is not None:
            self._touch(best)
            best.users += 1
            best.reused = True
            taken: Optional[Prefix] = best
            while taken is not None and taken.ahead:  # a prompt took it, and the runs it came from
                taken.ahead = False
                taken = taken.parent
        return best, best_n

    def prefetch(self, prompt: bytes, shared: Sequence[int], n_free_cells: int) -> Tuple[List[Prefix], bool]:
        """Makes the runs a waiting prompt's shared starts will take, so that they are decoded before it is
        admitted, in place of idle runs (least recently used first) but not of others made ahead, and as far
        as the cells they add fit n_free_cells. Returns the runs made, and whether every start has its run."""
        best, best_n = self._longest_start(prompt[:-TOKEN_BYTES])
        made: List[Prefix] = []
        for length in shared:
            if length - best_n < MIN_SHARED_TOKENS:
                continue
            n_free_cells -= length - best_n
            if n_free_cells < 0 or (not self._free_seqs and not self._evict_one(keep=best, ahead_too=False)):
                return made, False
            p = self._make(prompt[:length * TOKEN_BYTES], best, best_n, -1)
            p.ahead = True
            self._touch(p)
            made.append(p)
            best, best_n = p, length
        return made, True

    def _longest_start(self, start: bytes) -> Tuple[Optional[Prefix], int]:
        """The run that serves the longest part of start (whole, being decoded, or a ready run cut). A kept
        run that would serve fewer than MIN_SHARED_TOKENS tokens beyond the run it copied leaves the prompt
        to that run, so that kept runs count as reused (and stay) only when a prompt continues what their
        finished prompt decoded itself: annotation prompts after a shared instruction often share a word or
        two more ("Story: The"), and counting those would keep every finished prompt's run, crowding out
        the runs that serve whole starts."""
        best, best_n = None, 0
        for p in self._entries.values():
            if p.n_tokens <= best_n:
                continue
            if start.startswith(p.key):  # whole (ready, or wait for it)
                n = p.n_tokens
            elif (p.ready and self.can_cut(p.n_tokens)
                  and shares_start(start, p.key, max(best_n + 1, MIN_SHARED_TOKENS))):
                n = common_prefix_length(start, p.key)
            else:
                continue
            best, best_n = p, n
        if (best is not None and best.kept and best.parent is not None and self._holds(best.parent)
                and best_n - best.n_inherited < MIN_SHARED_TOKENS):
            return best.parent, best.n_inherited  # what the finished prompt decoded itself is not reused
        return best, best_n

    def _learn_from_ghosts(self, start: bytes, n_served: int) -> None:
        """A kept run evicted unused would have served this prompt better: kept runs stay longer."""
        for ghost in self._ghosts:
            if shares_start(start, ghost, n_served + MIN_SHARED_TOKENS):
                self._ghosts.remove(ghost)
                self.kept_idle_tokens = min(self._kept_idle_bounds[1], 2 * self.kept_idle_tokens)
                return

    def _make(self, key: bytes, parent: Optional[Prefix], n_parent: int,
              running_seq: int) -> Optional[Prefix]:
        if key in self._entries:  # being decoded for another prompt: wait for it
            return self._entries[key]
        if not self._free_seqs and not self._evict_one(keep=parent):
            return None
        p = Prefix(key, self._free_seqs.pop())
        self._entries[key] = p
        p.uncharged = p.n_tokens - n_parent
        if parent is not None and n_parent > 0:
            p.parent, p.n_inherited = parent, n_parent
            p.awaiting_parent = True
            parent.users += 1
            if parent.ready:
                self._inherit(p)
        elif running_seq >= 0 and n_parent > 0:  # the running prompt decoded (and is charged with) these
            self._kv.copy(running_seq, p.seq, n_parent)
            p.n_past = n_parent
        return p

    def _inherit(self, p: Prefix) -> None:
        self._kv.copy(p.parent.seq, p.seq, p.n_inherited)
        self.release(p.parent)
        p.awaiting_parent = False
        p.n_past = p.n_inherited
        p.uncharged += self.charge(p.parent, p.n_inherited)

    @staticmethod
    def charge(p: Prefix, n: int) -> int:
        """A prompt (or run) copies n tokens of p and takes on the part of their decode that p has not
        charged to anyone yet: returns how many tokens that is."""
        taken = min(p.uncharged, n)
        p.uncharged -= taken
        return taken

    def keep(self, seq: int, key: bytes, source: Optional[Prefix], n_source: int) -> None:
        """A finished prompt's decoded run (``key``, in sequence ``seq``) is kept for later prompts,
        unless a cached run already serves it. Its cells from ``source`` (the run it copied) count once."""
        n = n_tokens_of(key)
        if n < MIN_SHARED_TOKENS:
            return
        for p in self._entries.values():
            if (p.ready and p.n_tokens >= n and (p.n_tokens == n or self.can_cut(p.n_tokens))
                    and p.key.startswith(key)):
                self._touch(p)
                return
        # Only another kept run makes way for it: a run made for shared starts may still be wanted by prompts
        # of its call that wait for a sequence (a text's last questions, when the first ones end at once).
        if not self._free_seqs and not self._evict_one(kept_only=True):
            return
        p = Prefix(key, self._free_seqs.pop())
        self._kv.copy(seq, p.seq, -1)
        p.n_past = n
        p.kept = True
        if source is not None and self._holds(source):
            p.parent, p.n_inherited = source, n_source
        self._entries[key] = p
        self._touch(p)

    def prefix_ready(self, parent: Prefix) -> None:
        """A run is decoded: the runs waiting for it copy it."""
        if parent.users == 0:  # made ahead of its prompts: idle from now
            parent.fed_mark = self._fed
        for p in list(self._entries.values()):
            if p.parent is parent and p.awaiting_parent:
                self._inherit(p)

    def restart(self, p: Prefix) -> None:
        """A failed step emptied the run's sequence: it decodes its whole run itself from now on."""
        if p.awaiting_parent:
            p.parent.users -= 1
        p.parent, p.n_inherited, p.awaiting_parent, p.n_past = None, 0, False, 0
        p.uncharged = p.n_tokens

    def release(self, p: Prefix) -> None:
        p.users -= 1
        if p.users == 0:
            p.fed_mark = self._fed

    def drop(self, p: Prefix) -> None:
        """Removes a run at once (its decode failed); whoever waits for it decodes without it."""
        if self._holds(p):
            self._drop(p)
        for child in list(self._entries.values()):
            if child.parent is p and child.awaiting_parent:
                self.restart(child)

    def make_room(self, n_cells_elsewhere: int, n_fed: int) -> None:
        """Before a step that feeds n_fed tokens: evicts the idle runs that have waited too long, then idle
        runs least recently used first until they and n_cells_elsewhere fit the cache."""
        self._fed += n_fed
        for p in [p for p in self._entries.values()
                  if p.users == 0 and p.ready and self._fed - p.fed_mark > self._idle_limit(p)]:
            self._evict(p)
        while self.n_cells_held() + n_cells_elsewhere > self.n_cells and self._evict_one():
            pass

    def _idle_limit(self, p: Prefix) -> int:
        return self.kept_idle_tokens if p.kept else self._idle_tokens

    def _evict_one(self, keep: Optional[Prefix] = None, kept_only: bool = False, ahead_too: bool = True) -> bool:
        idle = [p for p in self._entries.values() if p.users == 0 and p.ready and p is not keep
                and (p.kept or not kept_only) and (ahead_too or not p.ahead)]
        if not idle:
            return False
        self._evict(min(idle, key=lambda p: p.last_used))
        return True

    def _evict(self, p: Prefix) -> None:
        """Drops an idle run. A kept run that no prompt used, whether it waited too long or made way for
        another run, tells the cache that this workload does not come back to finished prompts."""
        if p.kept and not p.reused:
            self.kept_idle_tokens = max(self._kept_idle_bounds[0], self.kept_idle_tokens * 3 // 4)
            self._ghosts.append(p.key)
        self._drop(p)
        self.n_evictions += 1

    def evict_idle(self) -> int:
        n = 0
        while self._evict_one():
            n += 1
        return n

    def _drop(self, p: Prefix) -> None:
        if p.awaiting_parent:
            p.parent.users -= 1
            p.awaiting_parent = False
        self._kv.clear(p.seq)
        del self._entries[p.key]
        self._free_seqs.append(p.seq)

    def drop_unclaimed(self) -> None:
        """Drops the runs still being decoded that no admitted prompt waits for (made ahead for prompts that
        were cancelled, or for a call that ended): decoding them would only take room from the steps."""
        while True:
            unclaimed = [p for p in self._entries.values() if p.users == 0 and not p.ready]
            if not unclaimed:
                return
            for p in unclaimed:
                self._drop(p)

    def clear(self) -> None:
        for p in list(self._entries.values()):
            self._drop(p)
