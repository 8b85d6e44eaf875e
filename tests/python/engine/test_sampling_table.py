"""Every door takes the sampling parameters of one table (newrllama.engine.sampling.sampling_table): the library, the C step,
the OpenAI server and the command line agree on each default and range; the R signatures are held to it in
r_package/tests/testthat/test-sampling-table.R."""
from __future__ import annotations

import math
import types

import pytest

import newrllama
from newrllama._lib import ffi, lib
from newrllama.__main__ import build_parser
from newrllama.engine.step.samplers import c_sampling_params
from newrllama.engine.sampling.sampling_table import SAMPLING_FIELDS
from newrllama.server.openai_request import BadRequest, completion_job


def inside(f):
    """Values each door must take: the ends of the range (the low end unless it is open) and the default."""
    values = [f.default, f.high if math.isfinite(f.high) else 1e6]
    if not f.low_open:
        values.append(f.low)
    return values


def outside(f):
    """Values each door must refuse: just past either end, and for numbers infinity and NaN."""
    step = 1 if f.kind is int else 0.01
    values = [f.low if f.low_open else f.low - step]
    if math.isfinite(f.high):
        values.append(f.high + step)
    if f.kind is float:
        values += [math.inf, math.nan]
    return values


def library_takes(f, value) -> bool:
    try:
        newrllama.SamplingParams(**{f.name: value})
        return True
    except newrllama.InvalidArgumentError:
        return False


def server_takes(f, value) -> bool:
    try:
        completion_job({"prompt": "x", f.request_name: value}, 16)
        return True
    except BadRequest as exc:
        assert exc.param == f.request_name
        return False


def c_takes(ctx, f, value) -> bool:
    settings = {g.name: g.default for g in SAMPLING_FIELDS}
    try:
        params = c_sampling_params(types.SimpleNamespace(**{**settings, f.name: value}))
    except OverflowError:  # the C field's own type cannot hold it
        return False
    out, err = ffi.new("newrllama_sampler_handle *"), ffi.new("const char **")
    if lib.newrllama_sampler_create(ctx.handle, params, 0, out, err) != lib.NEWRLLAMA_OK:
        return False
    lib.newrllama_sampler_free(out[0])
    return True


@pytest.mark.parametrize("f", SAMPLING_FIELDS, ids=lambda f: f.name)
def test_every_door_takes_the_tables_range(ctx, f):
    for value in inside(f):
        assert library_takes(f, value) and server_takes(f, value) and c_takes(ctx, f, value), value
    for value in outside(f):
        assert not library_takes(f, value) and not server_takes(f, value) and not c_takes(ctx, f, value), value


@pytest.mark.parametrize("f", SAMPLING_FIELDS, ids=lambda f: f.name)
def test_every_door_has_the_tables_default(f):
    assert getattr(newrllama.SamplingParams(), f.name) == f.default
    cli = build_parser().parse_args(["generate", "x"])
    assert getattr(cli, f.name) == f.default
    if f.name != "max_tokens":  # the server's comes from its --max-tokens
        assert getattr(completion_job({"prompt": "x"}, 16).params, f.name) == f.request_default
    assert (f.server_default is None and f.server_name is None) or f.server_why, "a difference needs its reason"


def test_a_penalty_given_alone_takes_effect(ctx):
    """repeat_last_n defaults to 64, so that penalty_repeat is not silently ignored."""
    prompt = "one one one one one one one one one one"
    plain = ctx.generate(prompt, newrllama.SamplingParams(max_tokens=8))
    penalised = ctx.generate(prompt, newrllama.SamplingParams(max_tokens=8, penalty_repeat=5.0))
    assert plain.text != penalised.text


def test_stop_strings_with_a_nul_are_refused_at_every_door():
    with pytest.raises(newrllama.InvalidArgumentError, match="NUL"):
        newrllama.SamplingParams(stop=["a\0b"])
    with pytest.raises(BadRequest, match="NUL"):
        completion_job({"prompt": "x", "stop": ["a\0b"]}, 16)
