"""Sends the chunks of a run to the workers and collects them as they finish.

Each worker gets up to IN_FLIGHT chunks at a time, so that its batch stays full: the
next chunk's prompts are waiting in its context when the previous chunk's finish. A
chunk whose worker dies goes back to the head of the queue, for another worker where
there is one, and the dead worker is replaced; after MAX_ATTEMPTS deaths the chunk's
prompts fail (and stay out of the output file, so a resumed run tries them again).
An argument error raised by a worker (a grammar that does not parse) ends the run as it
would locally."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple

from ..errors import InvalidArgumentError
from .pool import WorkerPool, worker_failure

IN_FLIGHT = 2
MAX_ATTEMPTS = 3
WAIT_SLICE_S = 0.25  # how long a wait for results may keep Ctrl-C waiting


@dataclass
class Chunk:
    indices: List[int]
    attempts: int = 0
    failed_on: Set[int] = field(default_factory=set)  # worker slots where it was running when they died


@dataclass
class DispatchStats:
    n_chunks: int = 0
    n_retried_chunks: int = 0
    n_failed_chunks: int = 0
    t_wait_s: float = 0.0  # time the driver spent blocked, waiting for workers


def _pick(load: List[int], avoid: Set[int]) -> Optional[int]:
    free = [s for s in range(len(load)) if load[s] < IN_FLIGHT]
    if not free:
        return None
    preferred = [s for s in free if s not in avoid] or free
    return min(preferred, key=lambda s: load[s])


def run_chunks(ray: Any, pool: WorkerPool, method: str, payload: Callable[[Sequence[int]], Tuple[Any, ...]],
               chunks: Sequence[Chunk], done: Callable[[Chunk, List[Any]], None],
               failed: Callable[[Chunk, str], None]) -> DispatchStats:
    """Runs every chunk; ``done`` receives each chunk's results as it finishes, ``failed`` the chunks
    that could not be run, with the reason."""
    stats = DispatchStats(n_chunks=len(chunks))
    pending: Deque[Chunk] = deque(chunks)
    running: Dict[Any, Tuple[Chunk, int, Any]] = {}
    load = [0] * len(pool)
    try:
        while pending or running:
            while pending:
                slot = _pick(load, pending[0].failed_on)
                if slot is None:
                    break
                chunk = pending.popleft()
                worker = pool.workers[slot]
                running[getattr(worker, method).remote(*payload(chunk.indices))] = (chunk, slot, worker)
                load[slot] += 1
            t0 = time.perf_counter()
            ready: List[Any] = []
            while not ready:
                # In slices: Python acts on Ctrl-C only between bytecodes, and a wait without a
                # timeout did not always return for it (a test saw a whole run go on to the end).
                ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_SLICE_S)
            stats.t_wait_s += time.perf_counter() - t0
            for ref in ready:
                chunk, slot, worker = running.pop(ref)
                load[slot] -= 1
                try:
                    results = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    pool.replace(slot, worker)
                    chunk.attempts += 1
                    chunk.failed_on.add(slot)
                    if chunk.attempts < MAX_ATTEMPTS:
                        pending.appendleft(chunk)
                        stats.n_retried_chunks += 1
                    else:
                        stats.n_failed_chunks += 1
                        failed(chunk, f"its worker died {chunk.attempts} times running it ({worker_failure(ray, exc)})")
                    continue
                except ray.exceptions.RayTaskError as exc:
                    error = worker_failure(ray, exc)
                    if isinstance(error, InvalidArgumentError):
                        raise error from None
                    stats.n_failed_chunks += 1
                    failed(chunk, str(error))
                    continue
                done(chunk, results)
    finally:
        for ref in running:  # Ctrl-C or an error: the workers' batches must not go on with this run
            ray.cancel(ref)
    return stats
