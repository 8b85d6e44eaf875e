"""The prefix cache: a shared instruction is decoded once, and answers stay those of prompts decoded alone."""
from __future__ import annotations

import threading

import pytest

import newrllama
from newrllama.engine.kv.prefix_cache import (MIN_SHARED_TOKENS, common_prefix_length, shared_start_lengths, shares_start,
                                    token_key, worth_caching)
from helpers.oracle import assert_greedy_alone
from helpers.prefix_samples import GREEDY, INSTRUCTION, OTHER_INSTRUCTION, STORIES, annotation_prompts, instruction_tokens

@pytest.fixture
def cached(model):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as c:
        yield c


def starts_of(prompts):
    return shared_start_lengths([token_key(p) for p in prompts])


def test_shared_start_lengths_are_where_the_prompts_branch():
    a = list(range(100))
    starts = starts_of([a + [1, 2], [7] * 50, a + [3], a + [1, 5, 6], [8] * 40, [7] * 50 + [9]])
    assert starts[0] == starts[2] == starts[3] == (100,)  # a + [1]: one token more, not worth a run of its own
    assert starts[1] == (49,) and starts[5] == (50,)      # the shorter keeps its last token to decode
    assert starts[4] == ()                                # alone
    assert starts_of([[1] * (MIN_SHARED_TOKENS - 1) + [2], [1] * (MIN_SHARED_TOKENS - 1) + [3]]) == [(), ()]


def test_token_keys_compare_whole_tokens():
    """Keys are the tokens' bytes: tokens that differ in a high byte only, and prompts whose byte order is not
    their token order, still compare and group by whole tokens."""
    key = token_key
    assert common_prefix_length(key([1, 2, 3]), key([1, 2, 4, 5])) == 2
    assert common_prefix_length(key([]), key([1])) == 0
    assert common_prefix_length(key([5, 0x10203]), key([5, 0x10303])) == 1
    assert common_prefix_length(key([7, 262143]), key([7, 262143, 1])) == 2
    assert shares_start(key([1, 2, 3]), key([1, 2, 9]), 2) and not shares_start(key([1, 2, 3]), key([1, 2, 9]), 3)
    assert not shares_start(key([1, 2]), key([1, 2]), 3)  # neither has three tokens
    high, low = [300] * 20, [1] * 20
    assert starts_of([high + [1], low + [2], high + [2], low + [3], [256] * 20]) == [(20,), (20,), (20,), (20,), ()]


def test_shared_starts_nest_a_system_prompt_then_each_text():
    system, text1, text2 = [5] * 40, [1] * 60, [2] * 60
    prompts = [system + text1 + [3, 3], system + text1 + [4], system + text2 + [3], system + text2 + [3, 9],
               [7] * 50, system + [9] * 10]
    starts = starts_of(prompts)
    assert starts[:4] == [(40, 100)] * 3 + [(40, 101)]  # the system all share, then each text's own (capped)
    assert starts[4] == () and starts[5] == (40,)
    # Two texts that begin alike for fewer than MIN_SHARED_TOKENS tokens more: one run, at the system.
    alike = [1] * (MIN_SHARED_TOKENS - 1)
    near = [system + alike + [2] * 40, system + alike + [3] * 40, system + [4] * 50]
    assert starts_of(near) == [(40,)] * 3
    assert worth_caching([40, 41, 100, 200], 150) == (40, 100, 150)


def test_nested_starts_decode_every_token_once(cached, model):
    """The instruction is decoded once for the call, each story once for its two questions."""
    stories = [s + " " + " ".join(STORIES) for s in STORIES[:3]]  # long enough to be worth caching
    prompts = [f"{INSTRUCTION}Story: {s}\n{q}" for s in stories for q in ("Label:", "Topic:")]
    completions = cached.generate_parallel(prompts, GREEDY)
    tokens = [model.tokenize(p) for p in prompts]
    starts = starts_of(tokens)
    assert all(len(s) == 2 for s in starts)  # the instruction, then the story
    runs = {tuple(t[:n]) for t, s in zip(tokens, starts) for n in s}
    assert len(runs) == 1 + len(stories)
    # Each run decodes only what its parent run does not hold; each prompt only its question.
    run_tokens = sum(len(run) - max([len(r) for r in runs if len(r) < len(run) and run[:len(r)] == r] or [0])
                     for run in runs)
    own_tokens = sum(len(t) - s[-1] for t, s in zip(tokens, starts))
    decoded = sum(c.n_prompt_tokens - c.n_cached_tokens for c in completions)
    assert decoded == run_tokens + own_tokens
    assert cached.last_stats.n_cached_tokens == sum(len(t) for t in tokens) - decoded
    for prompt, c in zip(prompts, completions):
        assert c.error is None
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2, prefix_cache=False) as plain:
        uncached = plain.generate_parallel(prompts, GREEDY)
    for prompt, c, u in zip(prompts, completions, uncached):
        assert c.text == u.text
    assert cached.n_used_cells() == 0


def test_instruction_is_decoded_once_within_a_call(cached, model):
    prompts = annotation_prompts(STORIES)
    completions = cached.generate_parallel(prompts, GREEDY)
    n_instr = instruction_tokens(model)
    for prompt, c in zip(prompts, completions):
        assert c.error is None and c.n_prompt_tokens == len(model.tokenize(prompt))
    # The first prompt to copy the instruction is charged with its decode; the others get it cached.
    assert sorted(c.n_cached_tokens >= n_instr - 1 for c in completions) == [False] + [True] * (len(prompts) - 1)
    stats = cached.last_stats
    assert stats.n_cached_tokens == sum(c.n_cached_tokens for c in completions) >= (len(prompts) - 1) * (n_instr - 1)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2, prefix_cache=False) as plain:
        uncached = plain.generate_parallel(prompts, GREEDY)
        assert plain.last_stats.n_cached_tokens == 0
    for prompt, c, u in zip(prompts[:5], completions, uncached):
        assert c.text == u.text
    assert cached.n_used_cells() == 0


def test_cached_instruction_serves_later_calls_and_single_prompts(cached, model, reference_llama):
    cached.generate_parallel(annotation_prompts(STORIES[:4]), GREEDY)
    later = annotation_prompts(STORIES[4:])
    completions = cached.generate_parallel(later, GREEDY)
    n_instr = instruction_tokens(model)
    assert cached.last_stats.n_cached_tokens >= len(later) * (n_instr - 1)
    one = cached.generate(later[0], GREEDY)
    assert one.n_cached_tokens >= n_instr - 1
    assert_greedy_alone(reference_llama, model, later[0], one)
    for prompt, c in zip(later[:3], completions):
        assert_greedy_alone(reference_llama, model, prompt, c)


def test_unrelated_prompts_in_the_same_call_are_isolated(cached, model, reference_llama):
    unrelated = ["The capital of France is", "def fibonacci(n):", "1, 2, 3, 4,"]
    prompts = annotation_prompts(STORIES[:5]) + unrelated
    completions = cached.generate_parallel(prompts, GREEDY)
    assert all(c.n_cached_tokens == 0 for c in completions[5:])
    assert sum(c.n_cached_tokens > 0 for c in completions[:5]) == 4  # one decodes the instruction for all
    for prompt, c in zip(prompts[3:], completions[3:]):
        assert_greedy_alone(reference_llama, model, prompt, c)


def test_prompt_equal_to_or_shorter_than_a_cached_prefix(cached, model, reference_llama):
    cached.generate_parallel(annotation_prompts(STORIES[:3]), GREEDY)
    # The prefix is shorter than the sliding window (512 tokens): its first tokens may be shared too.
    for prompt in (INSTRUCTION, INSTRUCTION[: len(INSTRUCTION) * 3 // 4]):
        c = cached.generate(prompt, GREEDY)
        assert c.error is None and 0 < c.n_cached_tokens < c.n_prompt_tokens
        assert_greedy_alone(reference_llama, model, prompt, c)


def test_prefix_past_the_sliding_window_is_never_cut(model, reference_llama):
    long_instruction = INSTRUCTION * 10  # about 10 x 58 tokens: past gemma 3's 512-token window
    assert instruction_tokens(model, long_instruction) > 512
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        prompts = annotation_prompts(STORIES[:2], long_instruction)
        first = ctx.generate_parallel(prompts, GREEDY)
        assert sorted(c.n_cached_tokens > 512 for c in first) == [False, True]  # the first decoded it
        shorter = long_instruction[: len(long_instruction) * 3 // 4]
        c = ctx.generate(shorter, GREEDY)
        assert c.error is None and c.n_cached_tokens == 0  # decoded in full: the cut could miss window cells
        assert_greedy_alone(reference_llama, model, shorter, c)
        again = ctx.generate_parallel(prompts, GREEDY)
        for prompt, a, b in zip(prompts, again, first):
            assert a.n_cached_tokens > 512
            assert a.text == b.text


@pytest.mark.slow
def test_runs_never_crowd_out_prompts_and_the_least_recently_used_go(model, reference_llama):
    # n_ctx 1024 over 2 sequences: four 290-token instructions stay cached beside the prompts, each run in a
    # KV stream of its own, and answers are the bits of a context without the cache.
    instructions = [f"Rule set {k}. " + OTHER_INSTRUCTION * 2 + f" End of rule set {k}.\n" for k in range(4)]
    with newrllama.Context(model, n_ctx=1024, n_seq_max=2, n_threads=2) as ctx, \
            newrllama.Context(model, n_ctx=1024, n_seq_max=2, n_threads=2, prefix_cache=False) as plain:
        for rounds in range(2):
            for k, instruction in enumerate(instructions):
                prompts = annotation_prompts(STORIES[2 * k:2 * k + 3], instruction)
                completions = ctx.generate_parallel(prompts, GREEDY)
                assert ctx.last_stats.n_fallbacks == 0 and ctx.last_stats.n_failed == 0
                assert sum(c.n_cached_tokens > 250 for c in completions) >= len(completions) - 1
        assert [c.token_ids for c in completions] == [c.token_ids for c in plain.generate_parallel(prompts, GREEDY)]
    # More runs than cache sequences (each group leaves its two prompts' runs): the least recently used go.
    with newrllama.Context(model, n_ctx=4096, n_seq_max=2, n_threads=2) as ctx:
        n_groups = newrllama.SchedulerConfig().prefix_cache_sequences // 2 + 2
        for k in range(n_groups):
            prompts = annotation_prompts(STORIES[:2], f"Group {k}. " + OTHER_INSTRUCTION)
            assert sum(c.n_cached_tokens > 0 for c in ctx.generate_parallel(prompts, GREEDY)) == 1
        stats = ctx.engine_stats()
        # The groups' kept runs made way for others unused, so kept runs go sooner and fewer than the bound stay.
        assert stats.n_cached_prefixes <= newrllama.SchedulerConfig().prefix_cache_sequences and stats.n_prefix_evictions >= 2
        again = ctx.generate_parallel(prompts, GREEDY)  # the last group's runs are still there
        assert all(c.n_cached_tokens >= c.n_prompt_tokens - 1 for c in again)
        assert_greedy_alone(reference_llama, model, prompts[1], ctx.generate_parallel(prompts, GREEDY)[1])


def test_budget_error_counts_the_cached_prefix(model):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=2) as ctx:
        fits = annotation_prompts(STORIES[:2])
        too_long = f"{INSTRUCTION}Story: {'word ' * ctx.n_ctx_seq}\nLabel:"
        completions = ctx.generate_parallel(fits + [too_long], GREEDY)
        assert [c.finish_reason for c in completions[:2]] != ["error", "error"]
        assert completions[2].finish_reason == "error"
        assert "cached shared prefix counts too" in completions[2].error
        assert sum(c.n_cached_tokens > 0 for c in completions[:2]) == 1


def test_concurrent_callers_share_one_cached_prefix(cached, model):
    expected = {p: c.text for p, c in zip(annotation_prompts(STORIES), cached.generate_parallel(annotation_prompts(STORIES), GREEDY))}
    results, errors = {}, []

    def caller(k):
        try:
            prompts = annotation_prompts(STORIES[k::3])
            results[k] = list(zip(prompts, cached.generate_parallel(prompts, GREEDY)))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    n_instr = instruction_tokens(model)
    for k in range(3):
        for prompt, c in results[k]:
            assert c.n_cached_tokens >= n_instr - 1
            assert c.text == expected[prompt]


def test_no_residue_a_fresh_context_gives_the_same_answers(cached, model):
    prompts = annotation_prompts(STORIES)
    cached.generate_parallel(annotation_prompts(STORIES[::-1], OTHER_INSTRUCTION), GREEDY)
    cached.generate_parallel(prompts[:3], GREEDY)
    warm = cached.generate_parallel(prompts, GREEDY)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as fresh:
        cold = fresh.generate_parallel(prompts, GREEDY)
    for prompt, w, c in zip(prompts, warm, cold):
        assert w.text == c.text


def test_prefix_cache_argument(model):
    with pytest.raises(newrllama.InvalidArgumentError, match="prefix_cache"):
        newrllama.Context(model, prefix_cache="yes")
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, prefix_cache=False) as ctx:
        assert not ctx.prefix_cache and "prefix_cache=False" in repr(ctx)
        assert all(c.n_cached_tokens == 0 for c in ctx.generate_parallel(annotation_prompts(STORIES[:3]), GREEDY))
