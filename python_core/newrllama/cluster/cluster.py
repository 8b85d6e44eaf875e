"""Cluster: prompts sharded over Ray workers, each with the model loaded once and one Context."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Union

from ..labels.annotate import label_in_cascade, warn_about_results, warn_if_base_model, warn_if_split
from ..models.embedded import default_model_path
from ..labels.cascade import Cascade, check_cascade
from ..labels.annotation import check_texts
from ..labels.annotations import ANNOTATION_COLUMN_PREFIX, Annotations
from ..frames import frame_texts, with_columns
from ..labels.annotation_options import options_of
from ..labels.annotation_task import AnnotationTask, Labels
from ..labels.codebook import ExamplesIn
from ..labels.codes_calibration import calibrated_by_codes
from ..engine.calls.context import usable_cores
from ..models.catalog import is_fetched
from ..errors import ClosedError, ClusterError, InvalidArgumentError, ModelLoadError
from ..engine.llama.model import Model, check_messages
from ..models.model_hash import ModelIdentity
from ..engine.calls.parallel import ParamsArg, Prompt
from ..engine.step.progress import Progress, check_progress, progress_bar
from ..engine.step.results import Completion
from .dispatch import Chunk, run_chunks
from ..labels.annotation_job import AnnotationJob
from ..engine.calls.generation_job import GenerationJob
from ..runs.jobs import Job
from .pool import WorkerPool, WorkerSpec, worker_failure
from ..runs.recording import Recording
from ..runs.results_file import RecordedRun

# Cells per sequence when n_ctx is not given: a prompt of a few hundred words and its answer.
DEFAULT_CELLS_PER_SEQUENCE = 1024


class _RuntimeHistory:
    """Whether this process has shut a Ray runtime down. Ray (2.60) cannot join a cluster from such a
    process: the GCS destroys the new driver's actors at once ("the actor never ran"), so that case is
    refused with advice instead of failing obscurely."""

    shut_down = False


@dataclass(frozen=True)
class ClusterStats:
    """Figures of the last run on a cluster."""

    n_prompts: int
    n_resumed: int  # found in the output file, not run again
    n_failed: int  # prompts whose result is an error (their own, or their chunk's)
    n_chunks: int
    n_retried_chunks: int  # sent again after their worker died
    n_workers_replaced: int
    t_total_s: float
    t_driver_s: float  # the driver's own work: checking, sharding, sending, collecting (not waiting)
    t_write_s: float  # writing the output file, fsync included
    prompts_per_second: float


def _count(name: str, value: object, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


class Cluster:
    """Workers on a Ray cluster, each loading ``model`` once (a GGUF path, a URL or hf:// address
    as for Model; None for the embedded model, which every worker finds in its own installation;
    a Model stands for its path).

    With ``address=None``, starts a local Ray runtime with room for ``num_workers`` workers of
    ``threads_per_worker`` CPU threads (default: this machine's cores shared out); else joins
    the running Ray cluster at ``address`` (``"auto"``, or ``"ray://host:10001"``). A Ray runtime
    already started in this process is used as it is. Each worker's context holds
    ``n_seq_max`` sequences and ``n_ctx`` cells (default 1024 per sequence).

    ``generate_parallel`` and ``annotate`` take the arguments of the local versions, plus
    ``ids`` (one str or int per prompt, naming it in the output file), ``output`` (a JSON
    Lines file to which every result is appended as soon as its chunk finishes, each line
    with the SHA-256 of the workers' model file), ``resume`` (run only the prompts not yet in
    ``output``; a file written by another model is refused) and ``retry_errors`` (with
    ``resume``: also run again the prompts whose line holds an error). Close it with ``close()`` or a
    ``with`` block: that stops the workers, and the Ray runtime if the cluster started it.
    """

    def __init__(self, model: Union[Model, str, os.PathLike, None] = None, *, num_workers: int = 2,
                 threads_per_worker: Optional[int] = None, n_seq_max: int = 16, n_ctx: Optional[int] = None,
                 address: Optional[str] = None, startup_timeout: float = 300.0) -> None:
        num_workers = _count("num_workers", num_workers)
        n_seq_max = _count("n_seq_max", n_seq_max)
        threads = _count("threads_per_worker", threads_per_worker, allow_none=True) or max(1, usable_cores() // num_workers)
        n_ctx = _count("n_ctx", n_ctx, allow_none=True) or DEFAULT_CELLS_PER_SEQUENCE * n_seq_max
        if isinstance(startup_timeout, bool) or not isinstance(startup_timeout, (int, float)) or not startup_timeout > 0:
            raise InvalidArgumentError(f"startup_timeout must be a positive number of seconds, got {startup_timeout!r}")
        if address is not None and not isinstance(address, str):
            raise InvalidArgumentError(f"address must be a str such as 'auto', got {type(address).__name__}")
        path = _model_path(model, local=address is None)
        # The file the driver can read, to warn of a base model before the workers label: the embedded one, or a
        # local file (a model fetched by name or URL is fetched by the workers; a recommended one is instruct).
        self._model_file = default_model_path() if path is None else path if os.path.isfile(path) else None
        try:
            import ray
        except ImportError:
            raise ClusterError("a Cluster needs Ray: pip install 'newrllama[cluster]'") from None
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray and address is not None and _RuntimeHistory.shut_down:
            raise ClusterError("Ray cannot join a cluster from a process that already ran and stopped a Ray runtime; "
                               "join it from a new Python (or R) session")
        if self._owns_ray:
            # Room for the workers even when they ask for more threads than there are cores.
            cpus = None if address is not None else max(usable_cores(), num_workers * threads)
            # "local": a runtime of our own, even where an earlier `ray start` left its address behind.
            try:
                ray.init(address=address or "local", num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                         logging_level="error")
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"join the Ray cluster at {address}" if address else "start a local Ray runtime"
                raise ClusterError(f"cannot {where}: {exc}") from None
        try:
            if address is None:
                _check_room(ray, num_workers, threads)
            self._pool: Optional[WorkerPool] = WorkerPool(ray, WorkerSpec(path, n_ctx, n_seq_max, threads),
                                                          num_workers, startup_timeout)
        except BaseException:
            self._shutdown_ray()
            raise
        self.chunk_size = n_seq_max
        self.last_stats: Optional[ClusterStats] = None

    def __repr__(self) -> str:
        if self._pool is None:
            return "<newrllama.Cluster (closed)>"
        info = self._pool.infos[0]
        return (f"<newrllama.Cluster {len(self._pool)} workers x {info['n_threads']} threads, "
                f"n_seq_max={info['n_seq_max']} n_ctx={info['n_ctx']}>")

    @property
    def closed(self) -> bool:
        return self._pool is None

    @property
    def workers(self) -> List[dict]:
        """What each worker says now: pid, host, model, n_threads, n_seq_max, n_ctx, and the prompts it is running
        (n_running) and has waiting for a sequence (n_waiting); a worker that replaces a dead one is waited for."""
        pool = self._open_pool()
        return self._ray.get([w.info.remote() for w in pool.workers])

    def apply_chat_template(self, conversations: Sequence[Sequence[dict]]) -> List[str]:
        """Each conversation (a list of {"role", "content"} messages) as a prompt in the workers' model's
        chat template, ready for the assistant's answer (formatted by a worker: the driver loads no model)."""
        if isinstance(conversations, (str, bytes)) or not isinstance(conversations, Sequence):
            raise InvalidArgumentError("conversations must be a list of conversations (lists of messages)")
        for messages in conversations:
            check_messages(messages)
        pool = self._open_pool()
        return self._ray.get(pool.workers[0].apply_chat_template.remote(list(conversations)))

    def generate_parallel(self, prompts: Sequence[Prompt], params: ParamsArg = None, *,
                          ids: Optional[Sequence[Hashable]] = None, output: Union[str, os.PathLike, None] = None,
                          resume: bool = False, retry_errors: bool = False, progress: Progress = None
                          ) -> List[Completion]:
        """Answers to ``prompts`` in input order (see Context.generate_parallel), run by the workers
        in chunks of ``n_seq_max`` prompts. A resumed prompt's Completion has its text, finish
        reason and token counts from the file, and empty ``token_ids``."""
        return self._run(GenerationJob(prompts, params), Recording(output, ids, resume, retry_errors), progress)

    def annotate(self, texts: Sequence[Optional[str]], labels: Union[AnnotationTask, Labels, None] = None,
                 instruction: str = "", *, progress: Progress = None, column: Optional[str] = None,
                 cascade: Optional[Cascade] = None,
                 # <annotation options>
                 definitions: Optional[Mapping[str, str]] = None,
                 examples: Optional[Sequence[Tuple[str, str]]] = None,
                 codebook: Optional[Mapping[str, Any]] = None,
                 debias: str = "auto",
                 calibration: Any = None,
                 examples_in: ExamplesIn = "system",
                 too_long: str = "error",
                 output: Union[str, os.PathLike, None] = None,
                 resume: bool = False,
                 retry_errors: bool = False,
                 ids: Optional[Sequence[Hashable]] = None,
                 # </annotation options>
                 ) -> Any:
        """One label per text (with a codebook, a dict question -> Annotation), in input order, run by the workers
        in chunks of ``n_seq_max`` texts: every argument as newrllama.annotate (a data frame with ``column``
        included), which each worker runs on its chunk; a text's labels are a local call's. "prior" and "batch"
        estimate their correction per chunk (a warning says so when the texts take more than one). ``cascade``: a
        Cascade whose model (a Context, another Cluster, a Model or a path) labels again the texts the workers' model
        is least sure of (see newrllama.annotate)."""
        frame, texts = frame_texts(texts, column, ANNOTATION_COLUMN_PREFIX)
        options = locals()
        task = AnnotationTask.of(labels, instruction, **options_of("task", options))
        recording = Recording(**options_of("recording", options))
        if check_cascade(cascade, task, recording.writes) is not None:
            out = label_in_cascade(texts, task, cascade, progress=progress, on=self)
        else:
            out = self.label_texts(texts, task, recording, progress=progress)
        return out if frame is None else with_columns(frame, out, ANNOTATION_COLUMN_PREFIX)

    def label_texts(self, texts: Sequence[Optional[str]], task: AnnotationTask, recording: Recording = Recording(),
                    *, progress: Progress = None) -> Annotations:
        """annotate() with its task and recording as objects (R's llm_annotate() calls this)."""
        checked = check_texts(texts)
        task.check_codes(len(checked))
        if self._model_file is not None:
            warn_if_base_model(self._model_file, stacklevel=4)
        warn_if_split(task.debias, len(checked), self.chunk_size, "each chunk a worker labels", stacklevel=4)
        results = calibrated_by_codes(self._run(AnnotationJob(checked, task), recording, progress), task, stacklevel=4)
        warn_about_results(results, list(task.books), stacklevel=4)
        return Annotations(results)

    def _run(self, job: Job, recording: Recording, progress: Progress) -> list:
        check_progress(progress)
        t_start = time.perf_counter()
        pool = self._open_pool()
        with RecordedRun(job, recording, lambda: self._model_identity(pool)) as run:
            todo = run.todo
            by_index: Dict[int, Any] = {}
            bar = progress_bar(len(todo), progress, "prompt", "newrllama cluster")

            def done(chunk: Chunk, chunk_results: List[Any]) -> None:
                by_index.update(zip(chunk.indices, chunk_results))
                run.record(chunk.indices, chunk_results)
                bar.update(len(chunk.indices))

            def failed(chunk: Chunk, reason: str) -> None:
                by_index.update((i, job.failed(f"not run: {reason}")) for i in chunk.indices)
                bar.update(len(chunk.indices))

            chunks = [Chunk(todo[a:a + self.chunk_size]) for a in range(0, len(todo), self.chunk_size)]
            try:
                stats = run_chunks(self._ray, pool, job.method, job.payload, chunks, done, failed)
            finally:
                bar.close()
            results = run.results([by_index[i] for i in todo])
            n_resumed, t_write = run.n_resumed, run.t_write
        t_total = time.perf_counter() - t_start
        self.last_stats = ClusterStats(
            n_prompts=len(job), n_resumed=n_resumed, n_failed=sum(job.has_error(r) for r in results),
            n_chunks=stats.n_chunks, n_retried_chunks=stats.n_retried_chunks, n_workers_replaced=pool.n_replaced,
            t_total_s=t_total, t_driver_s=t_total - stats.t_wait_s - t_write, t_write_s=t_write,
            prompts_per_second=(len(job) - n_resumed) / t_total if t_total > 0 else 0.0)
        return results

    def _model_identity(self, pool: WorkerPool) -> ModelIdentity:
        """The workers' model file and its SHA-256, as a worker sees it: the driver may not hold the file
        (a URL fetched by each machine, a path on a remote cluster, the embedded model)."""
        try:
            return self._ray.get(pool.workers[0].model_identity.remote())
        except self._ray.exceptions.RayError as exc:
            raise worker_failure(self._ray, exc) from None

    def _open_pool(self) -> WorkerPool:
        if self._pool is None:
            raise ClosedError("this cluster is closed")
        return self._pool

    def close(self) -> None:
        """Stops the workers, and the Ray runtime if this cluster started it."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            self._shutdown_ray()

    def _shutdown_ray(self) -> None:
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
            _RuntimeHistory.shut_down = True

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _model_path(model: object, local: bool) -> Optional[str]:
    if model is None:
        return None
    if isinstance(model, Model):
        return model.path
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidArgumentError(f"model must be a GGUF path, a Model or None, got {type(model).__name__}")
    spec = os.fspath(model)
    if is_fetched(spec):  # every worker fetches it into its own machine's cache (once per machine)
        return spec
    path = os.path.abspath(spec) if local else spec
    if local and not os.path.isfile(path):
        raise ModelLoadError(f"no model file at {path}")
    return path


def _check_room(ray: Any, num_workers: int, threads: int) -> None:
    free = ray.available_resources().get("CPU", 0)
    if free < num_workers * threads:
        raise ClusterError(f"the local Ray runtime has {free:g} free CPUs for {num_workers} workers of {threads} "
                           "threads: close the other Cluster of this process, or ask for fewer workers or threads")


