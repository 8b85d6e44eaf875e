"""Every context keeps a KV stream per sequence (as llama-server's slots): steps of mixed lengths, copies of
whole streams trimmed, failures rolled back and isolated."""
from __future__ import annotations

import pytest

import newrllama
from newrllama._capi import ffi, lib
from newrllama.engine.step.step_assembly import StepAssembly
from helpers.oracle import assert_greedy_alone
from helpers.samples import PROMPTS
from helpers.oracle import assert_close_to_oracle, oracle_probs
from helpers.samples import TOPIC_PROMPTS, TOPICS, check_labels
from helpers.step_driver import greedy_continuation, greedy_sampler, pos_range, step

GREEDY = newrllama.SamplingParams(max_tokens=16)


@pytest.fixture
def split4(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2, prefix_cache=False) as c:
        yield c


def test_every_context_splits_its_kv(model, split4):
    assert lib.newrllama_context_kv_unified(split4.handle) == 0
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as cached:
        assert lib.newrllama_context_kv_unified(cached.handle) == 0
        assert (cached.n_ctx, cached.n_ctx_seq) == (split4.n_ctx, split4.n_ctx_seq) == (2048, 512)
    assert lib.newrllama_context_kv_unified(ffi.NULL) == -1
    out, err = ffi.new("newrllama_context_handle *"), ffi.new("const char **")
    assert lib.newrllama_context_create_ex(model.handle, 1024, 1, 2, 0, 0, 2, 1, out, err) == \
        lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert "kv_unified" in ffi.string(err[0]).decode() and out[0] == ffi.NULL
    assert lib.newrllama_context_create_ex(model.handle, 1024, 1, 2, 0, 0, 0, 2, out, err) == \
        lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
    assert "batch_invariant" in ffi.string(err[0]).decode() and out[0] == ffi.NULL


def test_mixed_steps_chunks_and_continuous_batching(model, reference_llama):
    # Steps carry generating prompts (1 token) beside prefill chunks of other lengths: one pass per
    # distinct count. More prompts than sequences; one prompt longer than n_batch.
    long_prompt = "The history of the city goes back many centuries. " * 8
    prompts = [long_prompt] + PROMPTS + PROMPTS[:3]
    params = [newrllama.SamplingParams(max_tokens=4 if i % 2 else 20) for i in range(len(prompts))]
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_batch=64, n_threads=2, prefix_cache=False) as ctx:
        assert len(model.tokenize(long_prompt)) > ctx.n_batch
        completions = ctx.generate_parallel(prompts, params)
        assert [c.n_gen_tokens for c in completions] == [p.max_tokens for p in params]
        for prompt, c in zip(prompts, completions):
            assert_greedy_alone(reference_llama, model, prompt, c)
        assert ctx.n_used_cells() == 0


def test_multi_token_labels_score_on_copied_streams(split4, model, reference_llama):
    completions = split4.generate_parallel(TOPIC_PROMPTS, TOPICS)
    check_labels(completions, TOPICS)
    for prompt, c in zip(TOPIC_PROMPTS, completions):
        assert_close_to_oracle(c, oracle_probs(reference_llama, model, prompt, TOPICS.choices))


def test_a_partial_copy_is_the_whole_stream_trimmed(split4, model):
    prompt = model.tokenize(PROMPTS[0])
    n = len(prompt) - 3
    assert step(split4, [(0, 0, prompt, ffi.NULL)])[0] == lib.NEWRLLAMA_OK
    assert lib.newrllama_seq_copy(split4.handle, 0, 2, n, ffi.NULL) == lib.NEWRLLAMA_OK
    assert pos_range(split4, 2) == (0, n - 1) and pos_range(split4, 0) == (0, len(prompt) - 1)
    # The copy, continued with the prompt's last tokens, gives what the original gives.
    sampler = greedy_sampler(split4)
    try:
        code, _, slots, _, _ = step(split4, [(0, len(prompt), [2], sampler), (2, n, prompt[n:] + [2], sampler)])
        assert code == lib.NEWRLLAMA_OK and slots[0].token == slots[1].token
    finally:
        lib.newrllama_sampler_free(sampler)
    for s in (0, 2):
        assert lib.newrllama_seq_clear(split4.handle, s, ffi.NULL) == lib.NEWRLLAMA_OK
    assert split4.n_used_cells() == 0


def test_a_failed_step_is_rolled_back_exactly(split4, model):
    prompt = model.tokenize(PROMPTS[2])
    clean, _ = greedy_continuation(split4, prompt, 10)
    failed, statuses = greedy_continuation(split4, prompt, 10, fail_at=5)
    assert statuses == [lib.NEWRLLAMA_SLOT_ROLLED_BACK] and failed == clean
    assert split4.n_used_cells() == 0


def test_a_decode_failure_stays_with_its_prompt(split4):
    split4._inject_decode_failure(after_n_decodes=3, seq_id=1)
    completions = split4.generate_parallel(PROMPTS[:4], GREEDY)
    assert completions[1].finish_reason == "error" and "llama_decode failed" in completions[1].error
    assert all(completions[i].n_gen_tokens == GREEDY.max_tokens for i in (0, 2, 3))
    assert split4.n_used_cells() == 0
    assert all(c.error is None for c in split4.generate_parallel(PROMPTS[:4], GREEDY))


def test_a_prompt_waits_for_room_rather_than_start_with_a_few_tokens(model, reference_llama, monkeypatch):
    """Over a stream per sequence each distinct number of tokens in a step is a pass over the weights: in a step of
    prefill alone, a prompt's prefill does not begin with a piece of under n_batch / 4 tokens beside another
    prompt's chunk."""
    steps = []
    build = StepAssembly.build

    def recording(self, *args) -> bool:
        prefill = build(self, *args)
        steps.append([self.slots[i].n_tokens for i in range(len(self.holders))])
        return prefill
    monkeypatch.setattr(StepAssembly, "build", recording)
    body = "the old harbour town grew around its market, its mill and the long bridge over the river. " * 3
    prompts = [f"{word.capitalize()} says: {body}" for word in ("anna", "boris", "clara")]
    n = [len(model.tokenize(p)) for p in prompts]
    assert all(64 - 16 < k <= 64 for k in n)
    one = newrllama.SamplingParams(max_tokens=1)
    with newrllama.Context(model, n_ctx=3072, n_seq_max=3, n_batch=64, n_threads=2, prefix_cache=False) as ctx:
        completions = ctx.generate_parallel(prompts, one)
    assert steps == [[k] for k in n]
    for prompt, c in zip(prompts, completions):
        assert_greedy_alone(reference_llama, model, prompt, c)
