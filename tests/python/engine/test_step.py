"""The C step primitives through cffi: samplers, seeds, the step, its rollback, sequence operations."""
from __future__ import annotations

import pytest

import newrllama
from newrllama._capi import ffi, lib
from helpers.samples import PROMPTS
from helpers.step_driver import greedy_continuation, greedy_sampler, pos_range, step

# Sequences: 4 prompts, the cached runs and a scratch sequence per prompt.
PAST_THE_LAST_SEQUENCE = 4 + newrllama.SchedulerConfig().prefix_cache_sequences + 4

LLAMA_DEFAULT_SEED = 0xFFFFFFFF


@pytest.fixture
def step_ctx(model):
    """Room for long prompts: 1024 cells per sequence."""
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_batch=512, n_threads=2) as c:
        yield c


def test_step_decodes_and_samples_every_slot(step_ctx, model):
    sampler = greedy_sampler(step_ctx)
    try:
        prompts = [model.tokenize(p) for p in PROMPTS[:3]]
        code, rc, slots, _, _ = step(step_ctx, [(s, 0, t, sampler if s != 1 else ffi.NULL) for s, t in enumerate(prompts)])
        assert code == lib.NEWRLLAMA_OK and rc == 0
        assert slots[1].token == -1  # no sampler: no output
        assert slots[0].token >= 0 and slots[2].token >= 0
        assert [pos_range(step_ctx, s) for s in range(3)] == [(0, len(t) - 1) for t in prompts]
        # The same sampler object may serve several slots of one step (it is plain greedy).
        expected = greedy_continuation(step_ctx, prompts[0], 1, seq=3)[0][0]
        assert slots[0].token == expected
    finally:
        lib.newrllama_sampler_free(sampler)
        for s in range(3):
            lib.newrllama_seq_clear(step_ctx.handle, s, ffi.NULL)
    assert step_ctx.n_used_cells() == 0


@pytest.mark.parametrize("spans,why", [
    ([(0, 0, [1], None), (0, 5, [1], None)], "used by another slot"),
    ([(PAST_THE_LAST_SEQUENCE, 0, [1], None)], "outside"),
    ([(-1, 0, [1], None)], "outside"),
    ([(0, -1, [1], None)], "pos >= 0"),
    ([(0, 0, [], None)], "n_tokens >= 1"),
    ([(0, 0, [10**7], None)], "outside the vocabulary"),
    ([(0, 0, [-3], None)], "outside the vocabulary"),
    ([(0, 0, [2] * 300, None), (1, 0, [2] * 300, None)], "n_batch"),
])
def test_bad_slots_are_refused_and_change_nothing(step_ctx, spans, why):
    code, rc, _, _, message = step(step_ctx, [(s, p, t, ffi.NULL) for s, p, t, _ in spans])
    assert code == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT and rc == 0 and why in message
    assert step_ctx.n_used_cells() == 0


def test_null_arguments_are_refused(step_ctx):
    assert lib.newrllama_step(ffi.NULL, ffi.new("newrllama_slot[]", 1), 1, ffi.NULL, ffi.NULL) != lib.NEWRLLAMA_OK
    assert lib.newrllama_step(step_ctx.handle, ffi.NULL, 1, ffi.NULL, ffi.NULL) != lib.NEWRLLAMA_OK
    slots = ffi.new("newrllama_slot[]", 1)
    slots[0].n_tokens = 1  # tokens NULL
    assert lib.newrllama_step(step_ctx.handle, slots, 1, ffi.NULL, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert lib.newrllama_step(step_ctx.handle, slots, 0, ffi.NULL, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    out = ffi.new("newrllama_sampler_handle *")
    bad = ffi.new("newrllama_sampling_params *", {"max_tokens": 1, "top_p": 2.0, "penalty_repeat": 1.0})
    assert lib.newrllama_sampler_create(step_ctx.handle, bad, 0, out, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert out[0] == ffi.NULL
    assert lib.newrllama_sampler_create(ffi.NULL, bad, 0, out, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    lib.newrllama_sampler_free(ffi.NULL)
    lo = ffi.new("int32_t *")
    assert lib.newrllama_seq_pos_range(step_ctx.handle, PAST_THE_LAST_SEQUENCE, lo, lo, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert lib.newrllama_seq_clear(step_ctx.handle, -1, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert lib.newrllama_seq_copy(step_ctx.handle, 1, 1, -1, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert lib.newrllama_seq_copy(step_ctx.handle, 0, PAST_THE_LAST_SEQUENCE, -1, ffi.NULL) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert lib.newrllama_context_n_seq_extra(step_ctx.handle) == PAST_THE_LAST_SEQUENCE - 4
    assert lib.newrllama_context_n_seq_cache(step_ctx.handle) == lib.newrllama_context_n_seq_extra(step_ctx.handle)  # the old name


def test_failed_step_is_rolled_back_exactly(step_ctx, model):
    prompt = model.tokenize(PROMPTS[2])
    clean, _ = greedy_continuation(step_ctx, prompt, 12)
    failed, statuses = greedy_continuation(step_ctx, prompt, 12, fail_at=6)
    assert statuses == [lib.NEWRLLAMA_SLOT_ROLLED_BACK]
    assert failed == clean
    assert step_ctx.n_used_cells() == 0


def test_failed_prefill_past_the_sliding_window_clears_the_sequence(step_ctx, model):
    # gemma 3 attends over 512 positions on most layers; tokens of a failed chunk that
    # reaches past that may have reused cells the sequence still needs, so it is cleared.
    long_prompt = model.tokenize("The history of the city goes back many centuries. " * 100)[:700]
    sampler = greedy_sampler(step_ctx)
    try:
        assert step(step_ctx, [(0, 0, long_prompt[:400], ffi.NULL)])[0] == lib.NEWRLLAMA_OK
        step_ctx._inject_decode_failure(1, -1, -3)
        code, rc, slots, _, _ = step(step_ctx, [(0, 400, long_prompt[400:], sampler), (1, 0, long_prompt[:50], ffi.NULL)])
        assert code == lib.NEWRLLAMA_ERROR_DECODE and rc == -3
        assert slots[0].status == lib.NEWRLLAMA_SLOT_CLEARED and pos_range(step_ctx, 0) == (-1, -1)
        assert slots[1].status == lib.NEWRLLAMA_SLOT_ROLLED_BACK and pos_range(step_ctx, 1) == (-1, -1)
    finally:
        lib.newrllama_sampler_free(sampler)
    assert step_ctx.n_used_cells() == 0


def test_sequence_copy_and_clear(step_ctx, model):
    prompt = model.tokenize(PROMPTS[0])
    assert step(step_ctx, [(0, 0, prompt, ffi.NULL)])[0] == lib.NEWRLLAMA_OK
    assert lib.newrllama_seq_copy(step_ctx.handle, 0, 2, -1, ffi.NULL) == lib.NEWRLLAMA_OK
    assert pos_range(step_ctx, 2) == pos_range(step_ctx, 0) == (0, len(prompt) - 1)
    # Continuing the copy gives what continuing the original gives.
    sampler = greedy_sampler(step_ctx)
    try:
        code, _, slots, _, _ = step(step_ctx, [(0, len(prompt), [2], sampler), (2, len(prompt), [2], sampler)])
        assert code == lib.NEWRLLAMA_OK and slots[0].token == slots[1].token
    finally:
        lib.newrllama_sampler_free(sampler)
    for s in (0, 2):
        assert lib.newrllama_seq_clear(step_ctx.handle, s, ffi.NULL) == lib.NEWRLLAMA_OK
    assert pos_range(step_ctx, 0) == (-1, -1) and step_ctx.n_used_cells() == 0


def test_prompt_seeds_follow_the_prompt_not_its_position():
    a, b = [2, 651, 6037], [2, 651, 6038]
    seed = lib.newrllama_prompt_seed
    assert seed(42, a, 3, 0) == seed(42, a, 3, 0)
    assert len({seed(42, a, 3, 0), seed(42, b, 3, 0), seed(42, a, 3, 1), seed(43, a, 3, 0), seed(42, a, 2, 0)}) == 5
    assert seed(-1, a, 3, 0) == LLAMA_DEFAULT_SEED
    assert all(seed(s, a, 3, r) != LLAMA_DEFAULT_SEED for s in range(200) for r in range(3))


def test_one_shot_refuses_a_context_whose_sequences_are_in_use(step_ctx, model):
    assert step(step_ctx, [(1, 0, model.tokenize(PROMPTS[0]), ffi.NULL)])[0] == lib.NEWRLLAMA_OK
    params = ffi.new("struct newrllama_parallel_params *", [4, 40, 1.0, 0.0, 0, 1.0, 1])
    results = ffi.new("char ***")
    err = ffi.new("const char **")
    code = lib.newrllama_generate_parallel(step_ctx.handle, ffi.new("const char *[]", [ffi.new("char[]", b"Hi")]), 1,
                                           params, results, err)
    assert code == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT and "in use" in ffi.string(err[0]).decode()
    assert pos_range(step_ctx, 1)[1] >= 0  # the other caller's sequence is untouched
    lib.newrllama_seq_clear(step_ctx.handle, 1, ffi.NULL)
