"""Parallel generation: isolation, errors, scheduling, seeds, stop strings, cleanup, cancellation, threads."""
from __future__ import annotations

import os
import signal
import threading

import pytest

import newrllama
from newrllama._capi import ffi, lib
from helpers.samples import FRANCE, PROMPTS
from helpers.oracle import assert_greedy_alone

GREEDY = newrllama.SamplingParams(max_tokens=24)


def test_results_in_input_order_and_isolated(ctx, model, reference_llama):
    completions = ctx.generate_parallel(PROMPTS, GREEDY)
    assert len(completions) == len(PROMPTS)
    for prompt, c in zip(PROMPTS, completions):
        assert c.error is None and c.n_gen_tokens >= 1
        assert c.n_prompt_tokens == len(model.tokenize(prompt))
        assert_greedy_alone(reference_llama, model, prompt, c)
    stats = ctx.last_stats
    assert stats.n_gen_tokens == sum(c.n_gen_tokens for c in completions)
    # One decode per step carries every client: far fewer decodes than tokens.
    assert stats.n_decode_calls <= GREEDY.max_tokens + 2
    assert stats.tokens_per_second > 0 and stats.n_fallbacks == 0


def test_identical_prompts_in_one_batch_get_the_same_bits(ctx, model, reference_llama):
    # Each copy of the prompt has a KV stream of its own: every copy gives the same tokens, and they are (within
    # llama-cpp-python's rounding) its argmax of the prompt alone.
    for n in (8, 6):
        completions = ctx.generate_parallel([PROMPTS[2]] * n, GREEDY)
        assert len({tuple(c.token_ids) for c in completions}) == 1
        assert_greedy_alone(reference_llama, model, PROMPTS[2], completions[0])


def test_one_too_long_prompt_fails_alone(model):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as ctx:
        too_long = "word " * (ctx.n_ctx_seq + 10)
        prompts = [PROMPTS[0], too_long, PROMPTS[1], "", PROMPTS[3]]
        completions = ctx.generate_parallel(prompts, GREEDY)
        assert [c.finish_reason for c in completions].count("error") == 2
        assert completions[1].finish_reason == "error" and "n_ctx" in completions[1].error
        assert completions[3].finish_reason == "error" and "empty" in completions[3].error
        for i in (0, 2, 4):
            assert completions[i].error is None and completions[i].n_gen_tokens == GREEDY.max_tokens
        assert ctx.last_stats.n_failed == 2


def test_more_prompts_than_sequences_use_continuous_batching(model, reference_llama):
    prompts = PROMPTS + PROMPTS[:4]
    # Short and long answers alternate: wave by wave would wait for the longest of each wave.
    params = [newrllama.SamplingParams(max_tokens=4 if i % 2 else 32) for i in range(len(prompts))]
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as ctx:
        completions = ctx.generate_parallel(prompts, params)
        assert [c.n_gen_tokens for c in completions] == [p.max_tokens for p in params]
        waves = -(-len(prompts) // 4) * 33
        assert ctx.last_stats.n_decode_calls < waves * 0.75
        for prompt, c in zip(prompts, completions):
            assert_greedy_alone(reference_llama, model, prompt, c)
        assert ctx.n_used_cells() == 0


def test_prompts_longer_than_n_batch_are_prefilled_in_chunks(model, reference_llama):
    long_prompt = "The history of the city goes back many centuries. " * 12
    with newrllama.Context(model, n_ctx=1024, n_seq_max=2, n_batch=32) as ctx:
        assert len(model.tokenize(long_prompt)) > 3 * ctx.n_batch
        completions = ctx.generate_parallel([long_prompt, PROMPTS[0]], GREEDY)
        for prompt, c in zip([long_prompt, PROMPTS[0]], completions):
            assert c.error is None and c.n_gen_tokens == GREEDY.max_tokens
            assert_greedy_alone(reference_llama, model, prompt, c)


def test_per_prompt_seeds_are_distinct_and_reproducible(ctx):
    params = newrllama.SamplingParams(max_tokens=24, temperature=1.0, seed=42)
    first = [c.text for c in ctx.generate_parallel([PROMPTS[5]] * 4, params)]
    again = [c.text for c in ctx.generate_parallel([PROMPTS[5]] * 4, params)]
    assert first == again
    assert len(set(first)) > 1
    other_seed = [c.text for c in ctx.generate_parallel([PROMPTS[5]] * 4, newrllama.SamplingParams(
        max_tokens=24, temperature=1.0, seed=43))]
    assert other_seed != first


def test_negative_seed_is_random(ctx):
    params = newrllama.SamplingParams(max_tokens=24, temperature=1.0, seed=-1)
    runs = {tuple(c.text for c in ctx.generate_parallel([PROMPTS[5]] * 2, params)) for _ in range(3)}
    assert len(runs) > 1


def test_stop_strings_end_the_text_and_are_excluded(ctx):
    params = [newrllama.SamplingParams(max_tokens=40, stop=[" 7"]), newrllama.SamplingParams(max_tokens=40)]
    counted, free = ctx.generate_parallel(["1, 2, 3, 4,", "1, 2, 3, 4,"], params)
    assert counted.text == " 5, 6," and counted.finish_reason == "stop"
    assert free.text.startswith(" 5, 6, 7") and free.finish_reason == "length"


@pytest.mark.slow
def test_no_kv_residue_across_many_calls(model):
    params = newrllama.SamplingParams(max_tokens=16)
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as fresh:
        expected = fresh.generate(PROMPTS[3], params).text
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as ctx:
        for i in range(50):
            ctx.generate_parallel([PROMPTS[i % 8], PROMPTS[(i + 3) % 8]], newrllama.SamplingParams(max_tokens=4))
            assert ctx.n_used_cells() == 0
        assert ctx.generate(PROMPTS[3], params).text == expected


def test_empty_prompt_list_and_bad_arguments(ctx):
    assert ctx.generate_parallel([]) == []
    with pytest.raises(newrllama.InvalidArgumentError, match=r"prompts\[1\]"):
        ctx.generate_parallel(["a", None])
    with pytest.raises(newrllama.InvalidArgumentError):
        ctx.generate_parallel("a single string")
    with pytest.raises(newrllama.InvalidArgumentError, match="one per prompt"):
        ctx.generate_parallel(["a", "b"], [GREEDY])
    with pytest.raises(newrllama.InvalidArgumentError):
        ctx.generate_parallel(["a"], {"max_tokens": 3})


def test_c_one_shot_and_python_give_the_same_texts(ctx):
    prompts = PROMPTS[:5]
    params = ffi.new("struct newrllama_parallel_params *", [16, 40, 1.0, 0.0, 0, 1.0, 1234])
    c_prompts = [ffi.new("char[]", p.encode()) for p in prompts]
    results = ffi.new("char ***")
    err = ffi.new("const char **")
    assert lib.newrllama_generate_parallel(ctx.handle, ffi.new("const char *[]", c_prompts), len(prompts), params,
                                           results, err) == lib.NEWRLLAMA_OK
    try:
        c_texts = [ffi.string(results[0][i]).decode() for i in range(len(prompts))]
    finally:
        lib.newrllama_free_string_array(results[0], len(prompts))
    py_texts = [c.text for c in ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=16))]
    assert c_texts == py_texts


def test_c_one_shot_reports_failed_prompts_in_their_result(ctx):
    prompts = [ffi.new("char[]", b"Hello"), ffi.NULL, ffi.new("char[]", b"")]
    params = ffi.new("struct newrllama_parallel_params *", [4, 40, 1.0, 0.0, 0, 1.0, 1])
    results = ffi.new("char ***")
    err = ffi.new("const char **")
    code = lib.newrllama_generate_parallel(ctx.handle, ffi.new("const char *[]", prompts), 3, params, results, err)
    assert code == lib.NEWRLLAMA_ERROR_PROMPT and "2 of 3" in ffi.string(err[0]).decode()
    try:
        texts = [ffi.string(results[0][i]).decode() for i in range(3)]
    finally:
        lib.newrllama_free_string_array(results[0], 3)
    assert not texts[0].startswith("[ERROR]") and texts[1].startswith("[ERROR]") and texts[2].startswith("[ERROR]")


def test_decode_failure_of_one_client_is_isolated(model):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as ctx:
        ctx._inject_decode_failure(after_n_decodes=3, seq_id=1)
        completions = ctx.generate_parallel(PROMPTS[:4], GREEDY)
        assert completions[1].finish_reason == "error" and "llama_decode failed" in completions[1].error
        assert all(completions[i].n_gen_tokens == GREEDY.max_tokens for i in (0, 2, 3))
        assert ctx.last_stats.n_fallbacks >= 1
        assert ctx.n_used_cells() == 0
        again = ctx.generate_parallel(PROMPTS[:4], GREEDY)
        assert all(c.error is None for c in again)


def test_transient_decode_failure_falls_back_and_completes(model, reference_llama):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4) as ctx:
        ctx._inject_decode_failure(after_n_decodes=5, seq_id=-1, code=1)
        completions = ctx.generate_parallel(PROMPTS[:4], GREEDY)
        assert ctx.last_stats.n_fallbacks == 1
        for prompt, c in zip(PROMPTS[:4], completions):
            assert c.error is None and c.n_gen_tokens == GREEDY.max_tokens
            assert_greedy_alone(reference_llama, model, prompt, c)


def test_keyboard_interrupt_leaves_context_clean(model, ctrl_c_raises):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4) as ctx:
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            ctx.generate_parallel(PROMPTS * 4, newrllama.SamplingParams(max_tokens=200))
        timer.join()
        assert ctx.n_used_cells() == 0
        assert "Paris" in ctx.generate(FRANCE, newrllama.SamplingParams(max_tokens=6)).text


def test_c_progress_callback_can_cancel(ctx):
    calls = []

    @ffi.callback("int(int32_t, int32_t, int64_t, void *)")
    def cancel_after_three(n_done, n_total, n_gen, user_data):
        calls.append((n_done, n_total, n_gen))
        return 1 if len(calls) == 3 else 0

    prompts = ffi.new("newrllama_prompt[]", 3)
    keep = [ffi.new("char[]", p.encode()) for p in PROMPTS[:3]]
    for i, buf in enumerate(keep):
        prompts[i].text = buf
        prompts[i].text_len = len(PROMPTS[i])
    params = ffi.new("newrllama_sampling_params *", {"max_tokens": 50, "top_k": 40, "top_p": 1.0,
                                                     "penalty_repeat": 1.0, "seed": 1})
    results = ffi.new("newrllama_completion **")
    err = ffi.new("const char **")
    code = lib.newrllama_generate_parallel_ex(ctx.handle, prompts, 3, params, 1, cancel_after_three, ffi.NULL,
                                              results, ffi.NULL, err)
    try:
        assert code == lib.NEWRLLAMA_ERROR_CANCELLED
        assert [results[0][i].finish_reason for i in range(3)] == [lib.NEWRLLAMA_FINISH_CANCELLED] * 3
        assert calls[-1][1] == 3 and calls[-1][2] > 0
    finally:
        lib.newrllama_free_completions(results[0], 3)
    assert ctx.n_used_cells() == 0


def test_threads_sharing_a_context_get_their_own_answers(ctx):
    params = newrllama.SamplingParams(max_tokens=12)
    expected = [c.text for c in ctx.generate_parallel(PROMPTS[:3], params)]
    outputs, errors = [], []

    def worker():
        try:
            for _ in range(3):
                outputs.append(ctx.generate_parallel(PROMPTS[:3], params))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(outputs) == 6
    for completions in outputs:
        for prompt, c, text in zip(PROMPTS[:3], completions, expected):
            assert c.text == text


def test_module_level_generate_parallel(model):
    completions = newrllama.generate_parallel([FRANCE, "1, 2, 3,"], model, max_tokens=6)
    assert "Paris" in completions[0].text and completions[1].text.startswith(" 4")
    assert newrllama.generate_parallel([], model) == []
    with pytest.raises(newrllama.InvalidArgumentError):
        newrllama.generate_parallel([FRANCE], model, max_tokens=0)
