"""Contexts: a model's working memory (KV cache) for up to n_seq_max prompts at once."""
from __future__ import annotations

import os
import time
from typing import Callable, Hashable, List, Optional, Sequence, Tuple, Union

from ... import _lib
from ..._lib import ffi, lib
from .aio import AsyncTextStream, wait_for_call
from ...errors import ClosedError, InvalidArgumentError
from ..llama.handle import OwnedHandle
from .generation_job import GenerationJob
from ..kv.kv_store import ContextKv
from ..llama.model import Model
from ..sampling.params import SamplingParams
from .parallel import ParamsArg, Prompt, prepare_call
from ..policy import SchedulerConfig
from ..kv.prefix_cache import PrefixCache
from ..llama.reproducibility import Determinism, build_fingerprint, held_batch_invariance
from ..step.request import Call, Request
from ...runs.recording import Recording
from ...runs.results_file import RecordedRun
from ..step.results import Completion, GenerationStats
from ..step.results import EngineStats
from ..step.scheduler import Scheduler
from ..kv.sequence_layout import SequenceLayout
from .stream import TextStream
from ..step.progress import Progress, check_progress


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise InvalidArgumentError(f"{name} must be a positive 32-bit int, got {value!r}")
    return value


def _one_params(params: object) -> Optional[SamplingParams]:
    if params is not None and not isinstance(params, SamplingParams):
        raise InvalidArgumentError("params must be a SamplingParams")
    return params


def usable_cores() -> int:
    # The cores this process may run on (a container or taskset can allow fewer than the machine has).
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Context(OwnedHandle):
    """A llama.cpp context over ``model``.

    ``n_ctx`` cells are split evenly between ``n_seq_max`` sequences (each prompt
    and its answer must fit in ``n_ctx_seq = n_ctx / n_seq_max``); ``n_seq_max``
    is how many prompts are decoded together; ``n_batch`` caps the tokens of one
    decode step (longer prompts are prefilled in chunks). ``n_threads=None`` uses
    every core.

    A scheduler runs the context on the process's one engine thread (engine_thread.py:
    every context's decodes start from it, so that contexts do not slow each other
    down): prompts from every caller, in any thread, join the running batch at the next
    step, and each caller gets its own results in its own order.
    ``last_stats`` holds the figures of the call that ended last.

    With ``prefix_cache=True`` (the default), the engine keeps runs of tokens it decoded
    and a prompt starts from the longest one it begins with: a start of 8 tokens or more
    shared by prompts waiting together (an instruction followed by different documents,
    from one call or from many callers) is decoded once for all of them, a prompt admitted while
    another with the same start runs copies what that one decoded, and what a finished
    prompt decoded (its prompt and answer: the next turn of a chat starts with it) stays
    for later ones. Up to ``scheduler_config.prefix_cache_sequences`` runs are kept (each in a KV
    stream of n_ctx_seq cells), the least recently used evicted first. ``scheduler_config`` (a
    ``newrllama.SchedulerConfig``) holds the scheduling policy's numbers, among them how many steps
    a prompt that is only waited on may wait behind streamed ones.
    ``Completion.n_cached_tokens`` says how many prompt tokens the prompt did not decode
    (a start decoded for a group of prompts is charged to the first of them).

    Same input, same output: every sequence has a KV stream of its own (a cached run is
    copied whole into the prompt's stream) and every matmul takes one kernel whatever its
    number of rows, so a prompt's tokens and probabilities do not depend on what ran before
    on the context. With ``batch_invariant=True`` (the default) K and V are kept in bf16,
    where llama.cpp's flash attention attends every token over its sequence's cells one by
    one in any step (over f16 cells it takes pieces of 64 tokens or more tile by tile and
    splits a lone token's cells between threads, which round otherwise): a prompt's numbers
    then depend neither on the other prompts of its steps nor on how its prompt was cut into
    pieces (by room in a step, by a start from the cache). A prompt alone gives the bits it
    gives in any batch, from any caller. ``batch_invariant=False`` keeps llama.cpp's f16
    cells, whose tiled attention prefills long prompts faster; a prompt's numbers may then
    depend on its steps. ``engine_stats().determinism`` records what the numbers repeat with
    (the same n_threads, n_batch, n_seq_max and build give the same bits in another process).
    """

    _what = "context"

    def __init__(self, model: Model, *, n_ctx: int = 4096, n_seq_max: int = 8,
                 n_threads: Optional[int] = None, n_batch: int = 512, prefix_cache: bool = True,
                 batch_invariant: bool = True, scheduler_config: Optional[SchedulerConfig] = None) -> None:
        if not isinstance(model, Model):
            raise InvalidArgumentError(f"model must be a newrllama.Model, got {type(model).__name__}")
        if scheduler_config is None:
            scheduler_config = SchedulerConfig()
        elif not isinstance(scheduler_config, SchedulerConfig):
            raise InvalidArgumentError(
                f"scheduler_config must be a newrllama.SchedulerConfig, got {type(scheduler_config).__name__}")
        self.scheduler_config = scheduler_config
        n_threads = usable_cores() if n_threads is None else _positive_int("n_threads", n_threads)
        for name, value in (("n_ctx", n_ctx), ("n_seq_max", n_seq_max), ("n_batch", n_batch)):
            _positive_int(name, value)
        for name, value in (("prefix_cache", prefix_cache), ("batch_invariant", batch_invariant)):
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
        asked = SequenceLayout.requested(n_ctx, n_seq_max, n_batch, prefix_cache, scheduler_config)
        self.model = model
        self.last_stats: Optional[GenerationStats] = None
        held = held_batch_invariance(batch_invariant, model.backend, model.n_gpu_layers)
        err = _lib.new_error_slot()
        out = ffi.new("newrllama_context_handle *")
        _lib.check(lib.newrllama_context_create_ex(model.handle, n_ctx, n_threads, asked.n_seq, asked.n_batch,
                                                      asked.n_seq_cache + asked.n_seq_scratch, 0, int(batch_invariant),
                                                      out, err), err)
        super().__init__(out[0], lib.newrllama_context_free)
        self.n_threads = n_threads
        self._vocab = model.vocab
        layout = asked.made(lib.newrllama_context_n_seq_max(out[0]), lib.newrllama_context_n_seq_extra(out[0]),
                            lib.newrllama_context_n_batch(out[0]), lib.newrllama_context_n_ctx_seq(out[0]),
                            lib.newrllama_context_n_swa(out[0]))
        self._n_ctx_seq = layout.n_ctx_seq
        self.prefix_cache = layout.n_seq_cache > 0
        # Every run and every prompt has a stream of n_ctx_seq cells: the cache never runs out of cells.
        kv = ContextKv(out[0])
        cache = PrefixCache(kv, layout, scheduler_config) if self.prefix_cache else None
        self._scheduler = Scheduler(out[0], kv, layout, cache,
                                    Determinism(held, n_threads, layout.n_batch, layout.n_seq, build_fingerprint(),
                                                model.backend, model.n_gpu_layers, model.device),
                                    scheduler_config)

    def close(self) -> None:
        """Takes the context off the engine thread (calls still running end with ClosedError) and frees it."""
        with self._lock:
            if not self.closed:
                self._scheduler.close()
            super().close()

    def __repr__(self) -> str:
        if self.closed:
            return "<newrllama.Context (closed)>"
        return (f"<newrllama.Context n_ctx={self.n_ctx} n_seq_max={self.n_seq_max} "
                f"n_ctx_seq={self.n_ctx_seq} n_batch={self.n_batch} prefix_cache={self.prefix_cache}>")

    @property
    def batch_invariant(self) -> bool:
        return self._scheduler.determinism.batch_invariant

    @property
    def n_ctx(self) -> int:
        return lib.newrllama_context_n_ctx(self.handle)

    @property
    def n_ctx_seq(self) -> int:
        return lib.newrllama_context_n_ctx_seq(self.handle)

    @property
    def n_batch(self) -> int:
        return lib.newrllama_context_n_batch(self.handle)

    @property
    def n_seq_max(self) -> int:
        return lib.newrllama_context_n_seq_max(self.handle)

    def n_used_cells(self) -> int:
        """KV cells held by running prompts (cached prefixes aside); 0 between calls."""
        return lib.newrllama_context_n_used_cells(self.handle)

    def generate(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> Completion:
        """Answer to one prompt (text, or a list of token ids)."""
        return self.generate_parallel([prompt], _one_params(params))[0]

    def generate_parallel(self, prompts: Sequence[Prompt], params: ParamsArg = None, *,
                          progress: Progress = None, ids: Optional[Sequence[Hashable]] = None,
                          output: Union[str, os.PathLike, None] = None, resume: bool = False,
                          retry_errors: bool = False) -> List[Completion]:
        """Answers to many prompts, in input order, decoded together in batches.

        ``params`` is one SamplingParams for every prompt or a list with one per
        prompt. A prompt that cannot run gets ``finish_reason='error'`` while the
        others complete. Other threads' calls on this context share the batch.
        Ctrl-C stops this call (and only this call), leaving the context clean.

        ``output``: a JSON Lines file to which every answer is appended (and made
        durable) as it finishes, so that a run killed half-way loses nothing;
        ``resume=True`` then runs only the prompts not yet in it. Same file format,
        rules and refusals as ``Cluster.generate_parallel``: ``ids`` name the prompts
        in it (else their positions), a prompt run with other text or settings, or
        by another model file (each line records its SHA-256), is refused, and a
        resumed prompt's Completion has empty ``token_ids``. ``retry_errors=True``
        (with ``resume=True``) runs again the prompts whose line holds an error.
        ``last_stats`` covers the prompts run by this call. ``progress``: a progress bar (None, the default: on a
        terminal, once the call has run a few seconds; see engine/step/progress.py).
        """
        check_progress(progress)
        recording = Recording(output, ids, resume, retry_errors)
        if not recording.writes:
            return self._run_call(prompts, params, progress, None)
        job = GenerationJob(prompts, params)
        with RecordedRun(job, recording, self.model.identity, self._scheduler.determinism) as run:
            todo = run.todo
            todo_prompts, todo_params = job.payload(todo)
            done = self._run_call(todo_prompts, todo_params, progress,
                                  lambda finished: run.record([todo[i] for i, _ in finished], [c for _, c in finished]))
            return run.results(done)

    def _run_call(self, prompts: Sequence[Prompt], params: ParamsArg, progress: Progress,
                  on_done: Optional[Callable[[List[Tuple[int, Completion]]], None]]) -> List[Completion]:
        call, requests = self._call(prompts, params)
        self._submit(call, requests)
        call.wait(progress, self._scheduler.cancel, on_done)
        self.last_stats = call.stats(time.perf_counter())
        return list(call.completions)  # type: ignore[arg-type]

    def _call(self, prompts: Sequence[Prompt], params: ParamsArg):
        self.check_open()
        return prepare_call(self._vocab, self._n_ctx_seq, prompts, params, self.prefix_cache)

    def stream(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> TextStream:
        """The answer to one prompt as an iterator of text pieces, yielded as they are generated.

        It shares the batch with every other call on this context, ahead of them: someone
        reads it as it comes, so its prompt is admitted and prefilled before theirs, and every
        step carries its next token. ``stream.completion`` holds the whole
        answer once the iteration has ended; ``close()`` (or a ``with`` block) stops it early.
        """
        self.check_open()
        call, requests = prepare_call(self._vocab, self._n_ctx_seq, [prompt], _one_params(params))
        stream = TextStream(call, requests[0] if requests else None, self._scheduler.cancel)
        self._submit(call, requests)
        return stream

    async def agenerate_parallel(self, prompts: Sequence[Prompt], params: ParamsArg = None) -> List[Completion]:
        """generate_parallel for asyncio: awaits the answers without holding a thread. Cancelling the
        awaiting task cancels this call's prompts (their sequences are freed before the next step)."""
        call, requests = self._call(prompts, params)
        self._submit(call, requests)
        await wait_for_call(call, self._scheduler.cancel)
        if call.closed:
            raise ClosedError("the context was closed while this call was running")
        self.last_stats = call.stats(time.perf_counter())
        return list(call.completions)  # type: ignore[arg-type]

    async def agenerate(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> Completion:
        """generate for asyncio (see agenerate_parallel)."""
        return (await self.agenerate_parallel([prompt], _one_params(params)))[0]

    def astream(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> AsyncTextStream:
        """stream for asyncio, from within a running event loop: ``async for piece in ctx.astream(...)``."""
        self.check_open()
        call, requests = prepare_call(self._vocab, self._n_ctx_seq, [prompt], _one_params(params))
        stream = AsyncTextStream(call, requests[0] if requests else None, self._scheduler.cancel)
        self._submit(call, requests)
        return stream

    def engine_stats(self) -> EngineStats:
        """Steps run for this context so far, and the time spent in C and in Python around them."""
        return self._scheduler.stats()

    def _submit(self, call: Call, requests: List[Request]) -> None:
        call.t_start = time.perf_counter()
        if requests:
            self._scheduler.submit(requests)

    def _inject_decode_failure(self, after_n_decodes: int, seq_id: int = -1, code: int = -3) -> None:
        """Test hook: makes the n-th decode of the next call fail (for batches holding seq_id)."""
        err = _lib.new_error_slot()
        _lib.check(lib.newrllama_context_inject_decode_failure(self.handle, after_n_decodes, seq_id, code, err), err)
