"""Cached prompt prefixes: a shared instruction is decoded once, then shared by every prompt that starts with it.

A prefix lives in a cache sequence of its own (ids after the prompt sequences) and
is never extended or rewound after it is decoded: gemma 3's sliding-window layers
may reuse the cells of a sequence's old positions, so only a prefix's end is a
safe place to continue from. A prompt starting with a cached prefix gets a copy of
it (the unified KV cache shares the cells) and decodes only its own rest. Where
the prefix has never reached past the window, a prompt may also use its first
tokens only (a prompt equal to or shorter than the prefix).

Which prefixes are worth caching is decided per call, in the caller's thread: the
call's prompts are sorted, and runs of neighbours sharing at least
MIN_SHARED_TOKENS tokens share the run's common prefix; a caller that knows which
prompts belong together (a text's prompts) adds a longer prefix per group. A prefix
that starts with another cached one copies it (once it is decoded) and decodes only
its own rest, so nested prefixes (an instruction, then each text after it) decode
every token once. The cache keeps prefixes across calls, bounded by its sequences;
idle ones are evicted least recently used when a sequence or KV cells are needed.
All other methods run on the engine thread.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from . import _lib
from ._lib import ffi, lib

# Shorter shared prefixes are decoded with each prompt: caching them would cost a
# cache sequence and a step of waiting for less than it saves.
MIN_SHARED_TOKENS = 32


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (bisection over slice comparisons, which run in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_prefix_lengths(prompts: Sequence[List[int]]) -> List[int]:
    """For every prompt, how many of its first tokens it shares with its group of the call (0: none).

    A group is a run of the sorted prompts whose neighbours share at least
    MIN_SHARED_TOKENS tokens; its prefix stops one token short of its shortest prompt,
    since every prompt must decode at least its last token to be answered."""
    n = len(prompts)
    shared = [0] * n
    order = sorted(range(n), key=lambda i: prompts[i])
    start = 0
    while start < n:
        end, common = start + 1, None
        while end < n:
            lcp = common_prefix_length(prompts[order[end - 1]], prompts[order[end]])
            if lcp < MIN_SHARED_TOKENS:
                break
            common = lcp if common is None else min(common, lcp)
            end += 1
        if common is not None:
            members = order[start:end]
            length = min([common] + [len(prompts[i]) - 1 for i in members])
            if length >= MIN_SHARED_TOKENS:
                for i in members:
                    shared[i] = length
        start = end
    return shared


def group_prefix_lengths(prompts: Sequence[List[int]], groups: Sequence[object]) -> List[int]:
    """For every prompt, how many of its first tokens all prompts of its group (same key) share (0: none).

    For a caller that knows which prompts belong together (the questions about one text),
    where sorting neighbours would find a shorter prefix shared by every prompt of the call."""
    members: Dict[object, List[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    shared = [0] * len(prompts)
    for idx in members.values():
        if len(idx) < 2:
            continue
        first = prompts[idx[0]]
        length = min([len(prompts[i]) - 1 for i in idx] + [common_prefix_length(first, prompts[i]) for i in idx[1:]])
        if length >= MIN_SHARED_TOKENS:
            for i in idx:
                shared[i] = length
    return shared


class Prefix:
    """A cached prefix: its tokens, its cache sequence, and how much of it is decoded.

    It is filled into steps like a prompt that wants no output (same field names). One
    that starts with another cached prefix (its ``parent``) copies the parent's first
    ``n_inherited`` tokens when the parent is ready, and decodes only the rest."""

    __slots__ = ("token_list", "tokens", "n_tokens", "n_past", "seq", "sampler", "score", "users", "last_used",
                 "parent", "n_inherited", "awaiting_parent")

    def __init__(self, token_list: List[int], seq: int) -> None:
        self.token_list = token_list
        self.tokens = ffi.new("int32_t[]", token_list)
        self.n_tokens = len(token_list)
        self.n_past = 0
        self.seq = seq
        self.sampler = ffi.NULL
        self.score = None
        self.users = 0      # admitted prompts (and prefixes) that copied it or wait for it
        self.last_used = 0
        self.parent: Optional["Prefix"] = None
        self.n_inherited = 0
        self.awaiting_parent = False

    @property
    def ready(self) -> bool:
        return self.n_past == self.n_tokens


class PrefixCache:
    def __init__(self, ctx_handle, first_seq: int, n_seqs: int, n_swa: int, n_cells: int) -> None:
        self._ctx = ctx_handle
        self._err = _lib.new_error_slot()
        self._free_seqs = list(range(first_seq + n_seqs - 1, first_seq - 1, -1))
        self._n_swa = n_swa
        self.n_cells = n_cells
        self._entries: Dict[Tuple[int, ...], Prefix] = {}  # by tokens
        self._clock = 0
        self.n_evictions = 0

    @property
    def entries(self) -> List[Prefix]:
        return list(self._entries.values())

    def decoding(self) -> List[Prefix]:
        return [p for p in self._entries.values() if not p.ready and not p.awaiting_parent]

    def n_cells_held(self) -> int:
        """An upper bound of the cells the prefixes hold (cells shared with prompts count here only; cells a
        prefix copied from a parent still cached count once, with the parent)."""
        return sum(p.n_past - (p.n_inherited if p.parent is not None and self._holds(p.parent) else 0)
                   for p in self._entries.values())

    def _holds(self, p: Prefix) -> bool:
        return self._entries.get(tuple(p.token_list)) is p

    def _partial_use_is_sound(self, p: Prefix) -> bool:
        # Past the window, the first cells of a prefix may have been reused for its later positions.
        return p.ready and (self._n_swa == 0 or p.n_tokens < self._n_swa)

    def lookup(self, prompt: List[int], shared: Sequence[int] = ()) -> Tuple[Optional[Prefix], int]:
        """The prefix a prompt should start from, and how many of its tokens to take.

        ``shared`` holds the prefix lengths the prompt's call found worth caching, shortest
        first (the call's, then the prompt's group's); for each that no cached prefix serves
        (nearly), one is made (to be decoded, unless the cache has no room), each starting
        from the one before. A prompt keeps at least its last token to decode."""
        limit = len(prompt) - 1
        best, best_n = None, 0
        for p in self._entries.values():
            if p.n_tokens <= limit and p.n_tokens > best_n and prompt[:p.n_tokens] == p.token_list:
                best, best_n = p, p.n_tokens
            elif p.n_tokens > limit and self._partial_use_is_sound(p):
                n = common_prefix_length(prompt[:limit], p.token_list)
                if n >= MIN_SHARED_TOKENS and n > best_n:
                    best, best_n = p, n
        for length in shared:
            if length - best_n < MIN_SHARED_TOKENS:
                continue
            made = self._make(prompt[:length], best, best_n)
            if made is None:
                break
            best, best_n = made, length
        if best is not None:
            self._clock += 1
            best.last_used = self._clock
            best.users += 1
        return best, best_n

    def _make(self, token_list: List[int], parent: Optional[Prefix], n_parent: int) -> Optional[Prefix]:
        key = tuple(token_list)
        if key in self._entries:  # being decoded for another prompt: wait for it
            return self._entries[key]
        if not self._free_seqs and not self._evict_one(keep=parent):
            return None
        p = Prefix(token_list, self._free_seqs.pop())
        self._entries[key] = p
        if parent is not None and n_parent > 0:
            p.parent, p.n_inherited = parent, n_parent
            p.awaiting_parent = True
            parent.users += 1
            if parent.ready:
                self._inherit(p)
        return p

    def _inherit(self, p: Prefix) -> None:
        _lib.check(lib.newrllama_seq_copy(self._ctx, p.parent.seq, p.seq, p.n_inherited, self._err), self._err)
        p.parent.users -= 1
        p.awaiting_parent = False
        p.n_past = p.n_inherited

    def prefix_ready(self, parent: Prefix) -> None:
        """A prefix is decoded: the prefixes waiting for it copy it."""
        for p in list(self._entries.values()):
            if p.parent is parent and p.awaiting_parent:
                self._inherit(p)

    def restart(self, p: Prefix) -> None:
        """A failed step emptied the prefix's sequence: it decodes its whole run itself from now on."""
        if p.awaiting_parent:
            p.parent.users -= 1
        p.parent, p.n_inherited, p.awaiting_parent, p.n_past = None, 0, False, 0

    @staticmethod
    def release(p: Prefix) -> None:
        p.users -= 1

    def drop(self, p: Prefix) -> None:
        """Removes a prefix at once (its decode failed); whoever waits for it decodes without it."""
        if self._holds(p):
            self._drop(p)
        for child in list(self._entries.values()):
            if child.parent is p and child.awaiting_parent:
                self.restart(child)

    def make_room(self, n_cells_elsewhere: int) -> None:
        """Evicts idle prefixes, least recently used first, until they and n_cells_elsewhere fit the cache."""
        while self.n_cells_held() + n_cells_elsewhere > self.n_cells and self._evict_one():
            pass

    def _evict_one(self, keep: Optional[Prefix] = None) -> bool:
        idle = [p for p in self._entries.values() if p.users == 0 and p.ready and p is not keep]
        if not idle:
            return False
        self._drop(min(idle, key=lambda p: p.last_used))
        self.n_evictions += 1
        return True

    def evict_idle(self) -> int:
        n = 0
        while self._evict_one():
            n += 1
        return n

    def _drop(self, p: Prefix) -> None:
        if p.awaiting_parent:
            p.parent.users -= 1
            p.awaiting_parent = False
        lib.newrllama_seq_clear(self._ctx, p.seq, ffi.NULL)
        del self._entries[tuple(p.token_list)]
        self._free_seqs.append(p.seq)

    def clear(self) -> None:
        for p in list(self._entries.values()):
            self._drop(p)
