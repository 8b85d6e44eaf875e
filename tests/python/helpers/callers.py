"""Callers in threads: one call's prompts split between threads that share a context, merged back in order."""
from __future__ import annotations

import threading
from typing import Callable, List, Sequence, TypeVar

T = TypeVar("T")


def call_from_threads(call: Callable[[Sequence[str]], List[T]], prompts: Sequence[str], n_threads: int) -> List[T]:
    """call(prompts[i::n_threads]) in thread i, all at once; the answers in the prompts' order."""
    parts: dict = {}
    threads = [threading.Thread(target=lambda i=i: parts.__setitem__(i, call(prompts[i::n_threads])))
               for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged: List = [None] * len(prompts)
    for i in range(n_threads):
        merged[i::n_threads] = parts[i]
    return merged
