"""Calls started at once on threads, timed together: from the moment they are let go to the end of the last."""
from __future__ import annotations

import threading
import time
from typing import Callable


def run_together(n: int, work: Callable[[int], object]) -> float:
    """Seconds that n threads calling work(0) ... work(n - 1) took, all released by one barrier."""
    barrier = threading.Barrier(n + 1)

    def run(i: int) -> None:
        barrier.wait()
        work(i)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in pool:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - t0
