"""Drives the C engine (newrllama_generate_parallel_ex) from Python.

The batching loop itself lives in C so that the C one-shot and this API are
one engine; Python prepares the inputs, shows progress, turns Ctrl-C into a
cancellation that the engine cleans up after, and converts the results."""
from __future__ import annotations

import threading
from typing import List, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import ffi, lib
from .errors import GenerationError, InvalidArgumentError
from .model import check_token_list, encode_text
from .params import SamplingParams
from .results import Completion, GenerationStats

Prompt = Union[str, bytes, Sequence[int]]
ParamsArg = Union[SamplingParams, Sequence[SamplingParams], None]

_FINISH_REASONS = {lib.NEWRLLAMA_FINISH_STOP: "stop", lib.NEWRLLAMA_FINISH_LENGTH: "length",
                   lib.NEWRLLAMA_FINISH_ERROR: "error"}

# The call running on this thread, for the callback's error handler (which gets no user data).
_current = threading.local()


class _CallState:
    def __init__(self, total: int, progress: bool) -> None:
        self.exception: Optional[BaseException] = None
        self.bar = None
        self.done = 0
        if progress:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, unit="prompt", desc="newrllama")

    def on_step(self, n_done: int, n_gen_tokens: int) -> int:
        if self.bar is not None and n_done > self.done:
            self.bar.update(n_done - self.done)
            self.bar.set_postfix(tokens=n_gen_tokens, refresh=False)
        self.done = n_done
        return 0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _on_callback_error(exc_type, exc_value, traceback) -> int:
    state = getattr(_current, "state", None)
    if state is not None and state.exception is None:
        state.exception = exc_value
    return 1


@ffi.def_extern(error=1, onerror=_on_callback_error)
def newrllama_progress_trampoline(n_done, n_total, n_gen_tokens, user_data):
    state = ffi.from_handle(user_data)
    try:
        return state.on_step(n_done, n_gen_tokens)
    except BaseException as exc:  # Ctrl-C arrives here: cancel, and re-raise after the engine cleaned up
        state.exception = exc
        return 1


def normalize_params(params: ParamsArg, n_prompts: int) -> List[SamplingParams]:
    if params is None:
        return [SamplingParams()]
    if isinstance(params, SamplingParams):
        return [params]
    if isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
        raise InvalidArgumentError("params must be a SamplingParams or a list with one per prompt")
    items = list(params)
    if len(items) != n_prompts:
        raise InvalidArgumentError(f"params has {len(items)} entries for {n_prompts} prompts; give one per prompt")
    for i, p in enumerate(items):
        if not isinstance(p, SamplingParams):
            raise InvalidArgumentError(f"params[{i}] must be a SamplingParams, got {type(p).__name__}")
    return items


def _c_prompts(prompts: Sequence[Prompt], keep: list):
    c = ffi.new("newrllama_prompt[]", max(len(prompts), 1))
    for i, p in enumerate(prompts):
        if p is None:
            raise InvalidArgumentError(f"prompts[{i}] is None; every prompt must be a str (or a list of token ids)")
        if isinstance(p, (str, bytes)):
            data = encode_text(p, f"prompts[{i}]")
            buf = ffi.new("char[]", data)
            keep.append(buf)
            c[i].text = buf
            c[i].text_len = len(data)
        else:
            ids = check_token_list(p, f"prompts[{i}]")
            if not ids:
                raise InvalidArgumentError(f"prompts[{i}] is an empty token list")
            buf = ffi.new("int32_t[]", ids)
            keep.append(buf)
            c[i].tokens = buf
            c[i].n_tokens = len(ids)
    return c


def _c_params(params: List[SamplingParams], keep: list):
    c = ffi.new("newrllama_sampling_params[]", len(params))
    for i, p in enumerate(params):
        c[i].max_tokens = p.max_tokens
        c[i].top_k = p.top_k
        c[i].top_p = p.top_p
        c[i].min_p = p.min_p
        c[i].temperature = p.temperature
        c[i].repeat_last_n = p.repeat_last_n
        c[i].penalty_repeat = p.penalty_repeat
        c[i].seed = max(p.seed, -1)
        if p.stop:
            strings = [ffi.new("char[]", s.encode("utf-8", "surrogatepass")) for s in p.stop]
            array = ffi.new("const char *[]", strings)
            keep.extend(strings)
            keep.append(array)
            c[i].stop = array
            c[i].n_stop = len(strings)
    return c


def _completion(r) -> Completion:
    reason = _FINISH_REASONS[r.finish_reason]
    text = ffi.string(r.text).decode("utf-8", "replace") if r.text != ffi.NULL else ""
    return Completion(
        text=text,
        token_ids=list(ffi.unpack(r.token_ids, r.n_token_ids)) if r.n_token_ids else [],
        finish_reason=reason,  # type: ignore[arg-type]
        error=ffi.string(r.error).decode("utf-8", "replace") if r.error != ffi.NULL else None,
        n_prompt_tokens=r.n_prompt_tokens,
        n_gen_tokens=r.n_gen_tokens,
    )


def _stats(s, n_prompts: int) -> GenerationStats:
    return GenerationStats(
        n_prompts=n_prompts, n_prompt_tokens=s.n_prompt_tokens, n_gen_tokens=s.n_gen_tokens,
        t_prompt_s=s.t_prompt_s, t_gen_s=s.t_gen_s, t_total_s=s.t_total_s,
        tokens_per_second=s.tokens_per_second, n_decode_calls=s.n_decode_calls,
        n_fallbacks=s.n_fallbacks, n_failed=s.n_failed,
    )


def run(ctx_handle, prompts: Sequence[Prompt], params: ParamsArg, progress: bool
        ) -> Tuple[List[Completion], GenerationStats]:
    """One call of the engine: results in input order and the call's statistics."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise InvalidArgumentError("prompts must be a list of str")
    n = len(prompts)
    if n >= 2**26:
        raise InvalidArgumentError(f"too many prompts in one call: {n} (at most {2**26 - 1})")
    plist = normalize_params(params, n)
    keep: list = []
    c_prompts = _c_prompts(prompts, keep)
    c_params = _c_params(plist, keep)
    state = _CallState(n, progress)
    handle = ffi.new_handle(state)
    results = ffi.new("newrllama_completion **")
    stats = ffi.new("newrllama_parallel_stats *")
    err = _lib.new_error_slot()
    _current.state = state
    try:
        code = lib.newrllama_generate_parallel_ex(ctx_handle, c_prompts, n, c_params, len(plist),
                                                  lib.newrllama_progress_trampoline, handle, results, stats, err)
    finally:
        _current.state = None
        state.close()
    try:
        if code == lib.NEWRLLAMA_ERROR_CANCELLED:
            raise state.exception if state.exception is not None else KeyboardInterrupt()
        _lib.check(code, err)
        if results[0] == ffi.NULL:
            raise GenerationError("the engine returned no results")
        completions = [_completion(results[0][i]) for i in range(n)]
    finally:
        lib.newrllama_free_completions(results[0], n)
    return completions, _stats(stats, n)
