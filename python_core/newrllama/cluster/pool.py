"""The workers of a cluster: Ray actors started with one model and context each, waited for
until they are ready, and replaced when one dies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from ..errors import ClusterError, ModelLoadError, NewrllamaError
from .worker import Worker


@dataclass(frozen=True)
class WorkerSpec:
    model: Optional[str]  # None: each worker loads its own embedded model
    n_ctx: int
    n_seq_max: int
    n_threads: int


def worker_failure(ray: Any, exc: BaseException) -> NewrllamaError:
    """The newrllama error that made a worker fail, or a ClusterError that says what Ray reported."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, NewrllamaError):
        return cause
    text = str(exc)
    if "ModelLoadError" in text:  # an actor whose constructor raised reports only the traceback's text
        return ModelLoadError(text.strip().splitlines()[-1].split("ModelLoadError: ", 1)[-1])
    return ClusterError(f"a worker failed: {text.strip().splitlines()[-1] if text.strip() else type(exc).__name__}")


class WorkerPool:
    def __init__(self, ray: Any, spec: WorkerSpec, num_workers: int, startup_timeout: float) -> None:
        self._ray = ray
        self._spec = spec
        self._actor = ray.remote(Worker).options(num_cpus=spec.n_threads, max_restarts=0, max_task_retries=0)
        self.workers: List[Any] = [self._start() for _ in range(num_workers)]
        try:
            self.infos = ray.get([w.info.remote() for w in self.workers], timeout=startup_timeout)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise ClusterError(f"{num_workers} workers of {spec.n_threads} CPUs each did not start within "
                               f"{startup_timeout:g} s: does the Ray cluster have that many free CPUs?") from None
        except ray.exceptions.RayError as exc:
            self.close()
            raise worker_failure(ray, exc) from None
        self.n_replaced = 0

    def _start(self) -> Any:
        s = self._spec
        return self._actor.remote(s.model, s.n_ctx, s.n_seq_max, s.n_threads)

    def __len__(self) -> int:
        return len(self.workers)

    def replace(self, slot: int, dead: Any) -> None:
        """Starts a new worker in place of ``dead``, unless that was done already. Work sent to the
        new one waits until its model is loaded."""
        if self.workers[slot] is dead:
            self._ray.kill(dead, no_restart=True)
            self.workers[slot] = self._start()
            self.n_replaced += 1

    def close(self) -> None:
        for w in self.workers:
            try:
                self._ray.kill(w, no_restart=True)
            except Exception:  # already gone, or Ray is shutting down: nothing left to free
                pass
        self.workers = []
