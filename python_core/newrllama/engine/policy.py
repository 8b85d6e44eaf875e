"""The scheduler's policy in one place: its numbers (SchedulerConfig) and the order in which waiting prompts
get a sequence and prefill room (WaitingQueue, priority).

Streamed answers go first, because someone reads them as they come; a prompt that is only waited on goes
after them, but once it has waited max_steps_behind_streams steps it counts as a stream itself and keeps
its place by arrival, so a steady flow of streams cannot starve a batch. Everything here is pure Python,
tested without a model."""
from __future__ import annotations

import collections
import dataclasses
import itertools
from dataclasses import dataclass
from typing import Deque, Iterator, List, Optional, Protocol, Tuple

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class SchedulerConfig:
    """The numbers of a context's scheduling policy (defaults: what the benchmarks of bench/ chose)."""

    # At most this many steps a prompt that is only waited on waits behind streamed ones.
    max_steps_behind_streams: int = 16
    # In a step of prefill alone, a piece shorter than n_batch // prefill_piece_divisor waits for a step with
    # more room: every piece costs llama.cpp a pass over the weights (a KV stream per sequence).
    prefill_piece_divisor: int = 4
    # Cache sequences of the prefix cache (runs of prompts' starts).
    prefix_cache_sequences: int = 32
    # An idle run made for shared starts stays this many batches of tokens fed.
    idle_batches: int = 4
    # Kept runs evicted unused that the cache remembers, to learn that kept runs should stay longer.
    ghosts: int = 32

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            name, value = field.name, getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "ghosts" else 1):
                raise InvalidArgumentError(f"SchedulerConfig.{name} must be a positive integer (ghosts: >= 0), got {value!r}")


class Waiter(Protocol):
    """What the queue reads of a waiting request."""

    streamed: bool
    arrival: int       # its place in the order requests reached the scheduler
    arrived_step: int  # the scheduler's step count when it arrived


def priority(r: Waiter, step: int, config: SchedulerConfig) -> Tuple[int, int]:
    """Lower goes first: streams and prompts that waited long enough behind them, then the rest; each by
    arrival."""
    overdue = step - r.arrived_step >= config.max_steps_behind_streams
    return (0 if r.streamed or overdue else 1, r.arrival)


class WaitingQueue:
    """Requests waiting for a sequence, in two arrival-ordered lines (streams, the rest), taken by priority."""

    def __init__(self, config: SchedulerConfig) -> None:
        self._config = config
        self._streams: Deque = collections.deque()
        self._others: Deque = collections.deque()
        self._arrivals = itertools.count()

    def push(self, r, step: int) -> None:
        r.arrival = next(self._arrivals)
        r.arrived_step = step
        (self._streams if r.streamed else self._others).append(r)

    def _next_line(self, step: int) -> Optional[Deque]:
        candidates = [line for line in (self._streams, self._others) if line]
        if not candidates:
            return None
        return min(candidates, key=lambda line: priority(line[0], step, self._config))

    def pop(self, step: int):
        """The request to admit next, or None."""
        line = self._next_line(step)
        return line.popleft() if line is not None else None

    def in_order(self, step: int) -> Iterator:
        """The waiting requests in the order pop() would give them (if no more arrive), lazily: the scheduler
        reads only the first few, every step, of a queue that may hold a whole call's prompts."""
        streams, others = iter(self._streams), iter(self._others)
        s, o = next(streams, None), next(others, None)
        while s is not None or o is not None:
            if o is None or (s is not None and
                             priority(s, step, self._config) < priority(o, step, self._config)):
                yield s
                s = next(streams, None)
            else:
                yield o
                o = next(others, None)

    def remove_cancelled(self) -> List:
        """Takes the cancelled requests out; returns them."""
        cancelled = [r for r in itertools.chain(self._streams, self._others) if r.cancelled]
        if cancelled:
            self._streams = collections.deque(r for r in self._streams if not r.cancelled)
            self._others = collections.deque(r for r in self._others if not r.cancelled)
        return cancelled

    def take_all(self) -> List:
        taken = list(self._streams) + list(self._others)
        self._streams.clear()
        self._others.clear()
        return taken

    def __len__(self) -> int:
        return len(self._streams) + len(self._others)

    def __iter__(self) -> Iterator:
        return itertools.chain(self._streams, self._others)
