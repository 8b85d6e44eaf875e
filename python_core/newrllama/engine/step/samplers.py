"""A prompt's sampler in C: its sampling parameters' C form, its seed, the sampler made when the prompt is admitted
and freed when it ends. Sampling itself runs inside the step (newrllama_step), over the whole vocabulary."""
from __future__ import annotations

from typing import List

from ... import _lib
from ..._lib import ffi, lib
from ..sampling.params import SamplingParams
from .request import Request


def prompt_seed(params: SamplingParams, tokens: List[int], repeat: int) -> int:
    """A prompt's sampling seed, from the prompt itself (and which repeat of it this is), not its place in the
    call: a subset re-run samples the same answers."""
    return lib.newrllama_prompt_seed(max(params.seed, -1), tokens, len(tokens), repeat)


def c_sampling_params(p: SamplingParams):
    """The C form of the sampling part of p (stop strings and max_tokens stay in Python)."""
    c = ffi.new("newrllama_sampling_params *")
    c.max_tokens = p.max_tokens
    c.top_k = p.top_k
    c.top_p = p.top_p
    c.min_p = p.min_p
    c.temperature = p.temperature
    c.repeat_last_n = p.repeat_last_n
    c.penalty_repeat = p.penalty_repeat
    c.seed = p.seed
    return c


class SamplerError(Exception):
    """The C sampler could not be made (its grammar was parsed when the call was prepared: what fails is memory)."""


def new_sampler(ctx_handle, r: Request):
    """The sampler of an admitted prompt that generates (a prompt with choices has its labels scored instead)."""
    out = ffi.new("newrllama_sampler_handle *")
    err = _lib.new_error_slot()
    grammar = r.grammar if r.grammar is not None else ffi.NULL
    if lib.newrllama_sampler_create_ex(ctx_handle, r.c_params, r.seed, grammar, out, err) != lib.NEWRLLAMA_OK:
        raise SamplerError(ffi.string(err[0]).decode("utf-8", "replace"))
    return out[0]


def free_sampler(r: Request) -> None:
    if r.sampler is not None:
        lib.newrllama_sampler_free(r.sampler)
        r.sampler = None
