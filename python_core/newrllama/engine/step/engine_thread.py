"""One engine thread per process: it runs the steps of every Context's scheduler, in turn.

llama.cpp's CPU backend runs each decode as an OpenMP parallel region, and libgomp keeps
a team of worker threads for every thread that starts one. With a thread per context, a
process that has decoded on two contexts manages more OpenMP threads than it has cores;
libgomp then sleeps in the kernel almost at once where its threads wait for each other.
newrllama's build of llama.cpp meets at its own barrier within a decode (the futex-barrier
patch, which spins briefly and then sleeps, whatever teams the process holds), but a
region's start and end are still libgomp's, and two contexts stepping at once would put
more busy threads than cores on the machine. One thread starting every decode keeps one team.

Schedulers share the engine's condition variable: callers add work under it and notify;
the engine takes each scheduler with work, one step each per round, so one context's
long call does not hold back another's.
"""
from __future__ import annotations

import threading
from typing import List, Optional, Protocol


class Turns(Protocol):
    """What the engine thread needs from a scheduler."""

    def wants_turn(self) -> bool:
        """It has something to do (called with the engine's lock held)."""

    def take_incoming(self) -> bool:
        """Moves submitted work in (lock held); True if cancelled requests must be reaped."""

    def turn(self, reap: bool) -> None:
        """One round: reap, admit, run one step (lock not held)."""


class EngineThread:
    def __init__(self) -> None:
        self.cv = threading.Condition()
        self._schedulers: List[Turns] = []
        self._thread: Optional[threading.Thread] = None
        self._running: Optional[Turns] = None  # whose turn runs now

    def attach(self, scheduler: Turns) -> None:
        """Makes the engine run scheduler's turns (lock held)."""
        if scheduler not in self._schedulers:
            self._schedulers.append(scheduler)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="newrllama-engine", daemon=True)
            self._thread.start()
        self.cv.notify_all()

    def detach(self, scheduler: Turns) -> None:
        """The engine will not start another turn of scheduler; returns once a running one has ended."""
        with self.cv:
            if scheduler in self._schedulers:
                self._schedulers.remove(scheduler)
            while self._running is scheduler and not self.in_engine_thread():
                self.cv.wait()

    def in_engine_thread(self) -> bool:
        return self._thread is threading.current_thread()

    def _run(self) -> None:
        while True:
            with self.cv:
                while not any(s.wants_turn() for s in self._schedulers):
                    self.cv.wait()
                turns = [(s, s.take_incoming()) for s in self._schedulers if s.wants_turn()]
            for scheduler, reap in turns:
                with self.cv:
                    if scheduler not in self._schedulers:  # closed meanwhile
                        continue
                    self._running = scheduler
                try:
                    scheduler.turn(reap)
                finally:
                    with self.cv:
                        self._running = None
                        self.cv.notify_all()


_engine: Optional[EngineThread] = None
_engine_lock = threading.Lock()


def engine() -> EngineThread:
    """The process's engine thread (started at the first submitted prompt)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = EngineThread()
        return _engine
