"""The prefix cache across callers: threads, streams and calls share starts; finished prompts' runs serve later
ones (the next turn of a chat); faults and pressure neither fail a prompt nor leak a sequence."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import newrllama
from newrllama.engine.kv.prefix_cache import MIN_SHARED_TOKENS, common_prefix_length, token_key
from helpers.oracle import MARGIN, assert_greedy_alone, worst_gap
from helpers.prefix_samples import GREEDY, INSTRUCTION, OTHER_INSTRUCTION, STORIES, annotation_prompts, instruction_tokens


def assert_idle(ctx: newrllama.Context) -> None:
    """Nothing running, no cached run pinned: every sequence the calls took is back."""
    assert ctx.n_used_cells() == 0
    stats = ctx.engine_stats()
    assert stats.n_running == 0 and stats.n_waiting == 0
    assert all(p.users == 0 and p.ready for p in ctx._scheduler.cache.entries)
    assert stats.n_cached_prefixes <= ctx.scheduler_config.prefix_cache_sequences


def busy(ctx: newrllama.Context) -> threading.Thread:
    """A long generation that keeps the engine stepping, so that prompts submitted now arrive together."""
    worker = threading.Thread(target=ctx.generate, args=("Once upon a time", newrllama.SamplingParams(max_tokens=60)))
    worker.start()
    time.sleep(0.3)
    return worker


def test_sixteen_threads_calling_generate_decode_the_instruction_once(model, reference_llama):
    prompts = annotation_prompts(STORIES + [s.upper() for s in STORIES[:6]])
    results = {}
    with newrllama.Context(model, n_ctx=8192, n_seq_max=16, n_threads=2) as ctx:
        threads = [threading.Thread(target=lambda p: results.__setitem__(p, ctx.generate(p, GREEDY)), args=(p,))
                   for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        n_instr = instruction_tokens(model)
        # However the threads arrived (together, or while another ran), at most one or two decode it.
        assert sum(c.n_cached_tokens >= n_instr - 1 for c in results.values()) >= len(prompts) - 2
        for p in prompts[:3]:
            assert_greedy_alone(reference_llama, model, p, results[p])
        assert_idle(ctx)


def test_a_lone_request_reuses_what_a_finished_one_decoded(model, reference_llama):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        first, later = annotation_prompts(STORIES[:2])
        ctx.generate(first, GREEDY)
        c = ctx.generate(later, GREEDY)
        assert c.n_cached_tokens >= instruction_tokens(model) - 1
        assert_greedy_alone(reference_llama, model, later, c)
        # A different instruction shares nothing with it.
        other = ctx.generate(annotation_prompts(STORIES[:1], OTHER_INSTRUCTION)[0], GREEDY)
        assert other.n_cached_tokens == 0
        assert_idle(ctx)


def next_turn(model, prompt, answer) -> list:
    return prompt + answer.token_ids + model.tokenize("\nUser: and what happened next?\nAssistant:", add_special=False)


def test_an_idle_run_survives_pauses_and_goes_after_enough_prefill(model):
    # An idle run lasts SchedulerConfig.idle_batches x n_batch tokens fed.
    idle_batches = newrllama.SchedulerConfig().idle_batches
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2, n_batch=64) as ctx:
        first, later, last = annotation_prompts(STORIES[:3])
        ctx.generate(first, GREEDY)
        time.sleep(1.0)
        assert ctx.generate(later, GREEDY).n_cached_tokens >= instruction_tokens(model) - 1
        fed = 0
        for k in range(idle_batches * 64 // instruction_tokens(model, OTHER_INSTRUCTION) + 1):
            other = f"{k} {OTHER_INSTRUCTION}"
            ctx.generate(other, GREEDY)
            fed += len(model.tokenize(other))
        assert fed > idle_batches * 64
        assert ctx.generate(last, GREEDY).n_cached_tokens == 0
        assert ctx.engine_stats().n_prefix_evictions >= 1
        assert_idle(ctx)


def test_kept_runs_go_sooner_when_unused_and_stay_longer_when_missed(model):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2, n_batch=64) as ctx:
        cache = ctx._scheduler.cache
        start = cache.kept_idle_tokens
        distinct = [f"{k} {OTHER_INSTRUCTION}" for k in range(6)]
        for prompt in distinct:
            ctx.generate(prompt, GREEDY)
        lowered = cache.kept_idle_tokens
        assert lowered < start
        assert cache.n_cells_held() <= 2 * len(model.tokenize(distinct[0])) + 2 * GREEDY.max_tokens
        # Their runs went unused; prompts they would have served make kept runs stay longer.
        for prompt in distinct[:3]:
            assert ctx.generate(prompt + " Once more.", GREEDY).n_cached_tokens == 0
        assert cache.kept_idle_tokens > lowered
        assert_idle(ctx)


def test_a_word_shared_after_the_instruction_does_not_make_finished_runs_worth_keeping(model):
    """Texts after a cached instruction often open alike ("The central bank ..."). A finished prompt's run that
    would give a later prompt only those few tokens beyond the instruction (fewer than MIN_SHARED_TOKENS) is
    not counted as reused, nor does its ghost make kept runs stay longer: counted, every finished prompt's run
    stayed, and the idle cells slowed every step."""
    opening = "The central bank"
    first, second, later, last = annotation_prompts([f"{opening} raised rates.", "Oil prices fell.",
                                                     f"{opening} cut its forecast.", f"{opening} bought bonds."])
    with newrllama.Context(model, n_ctx=8192, n_seq_max=4, n_threads=2) as ctx:
        cache = ctx._scheduler.cache
        ctx.generate_parallel([first, second], GREEDY)  # the instruction's run, and two kept runs after it
        (instruction,) = [p for p in cache.entries if not p.kept]
        kept = [p for p in cache.entries if p.kept]
        assert len(kept) == 2 and all(p.parent is instruction for p in kept)
        extra = common_prefix_length(token_key(model.tokenize(later)), kept[0].key) - instruction.n_tokens
        assert 0 < extra < MIN_SHARED_TOKENS
        assert ctx.generate(later, GREEDY).n_cached_tokens >= instruction.n_tokens
        assert not any(p.reused for p in kept)  # the prompt took the instruction's run
        for p in kept:
            cache._evict(p)
        limit = cache.kept_idle_tokens
        assert ctx.generate(last, GREEDY).n_cached_tokens >= instruction.n_tokens
        assert cache.kept_idle_tokens == limit  # the ghosts would have served `extra` tokens more: no lesson
        assert_idle(ctx)


def test_kept_runs_that_make_way_for_others_unused_teach_the_cache_too(model):
    """After a workload that came back to finished prompts, the limit is high and kept runs of a workload that
    never does are evicted for want of a sequence, not for waiting: those evictions lower it as well."""
    with newrllama.Context(model, n_ctx=8192, n_seq_max=4, n_threads=2, n_batch=64) as ctx:
        cache = ctx._scheduler.cache
        high = cache.kept_idle_tokens = 64 * ctx.n_batch
        opening = " ".join(OTHER_INSTRUCTION.split()[:12])
        distinct = [f"{k} {opening}" for k in range(ctx.scheduler_config.prefix_cache_sequences + 8)]
        assert sum(len(model.tokenize(p)) + GREEDY.max_tokens for p in distinct) < high  # none waits too long
        ctx.generate_parallel(distinct, GREEDY)
        assert ctx.engine_stats().n_prefix_evictions >= 8
        assert cache.kept_idle_tokens < high
        assert_idle(ctx)


@pytest.mark.slow
def test_the_next_turn_of_a_conversation_copies_the_last_one(model, reference_llama):
    """A turn's run (its prompt and the answer tokens decoded) serves the next turn, also past gemma 3's window,
    where only a run's whole length may be reused."""
    short = model.tokenize("User: tell me a story about a river, a mill, a bridge, a miller, his daughter and the "
                           "town that grew on both banks.\nAssistant:")
    long = model.tokenize("User: " + INSTRUCTION * 10 + "\nAssistant:")
    assert len(long) > 512
    params = newrllama.SamplingParams(max_tokens=8)
    with newrllama.Context(model, n_ctx=8192, n_seq_max=2, n_threads=2) as ctx:
        for turn1 in (short, long):
            prompt = turn1
            for _ in range(3):
                answer = ctx.generate(prompt, params)
                assert answer.finish_reason == "length"  # the last token was sampled, never decoded
                following = next_turn(model, prompt, answer)
                c = ctx.generate(following, params)
                assert c.n_cached_tokens == len(prompt) + len(answer.token_ids) - 1
                assert worst_gap(reference_llama, following, c.token_ids) <= MARGIN
                prompt = following
        assert_idle(ctx)


@pytest.mark.slow
def test_a_prompt_past_the_window_continues_from_a_cached_run(model, reference_llama):
    long_story = " ".join(STORIES) * 12
    prompts = [f"{INSTRUCTION}Story: {long_story} ({k})\nLabel:" for k in range(2)]
    assert all(len(model.tokenize(p)) > 600 for p in prompts)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=2, n_threads=2) as ctx:
        ctx.generate(annotation_prompts(STORIES[:1])[0], GREEDY)  # the instruction, cached, shorter than 512
        completions = ctx.generate_parallel(prompts, GREEDY)
        assert all(c.n_cached_tokens >= instruction_tokens(model) - 1 for c in completions)
        for p, c in zip(prompts, completions):
            assert_greedy_alone(reference_llama, model, p, c)
        assert_idle(ctx)


def test_a_prompt_cancelled_while_its_start_is_decoded_for_others(model, reference_llama):
    prompts = annotation_prompts(STORIES[:4])
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8, n_threads=2) as ctx:
        worker = busy(ctx)
        stream = ctx.stream(prompts[0], GREEDY)  # submitted with the others: it waits for the shared start
        others = []
        caller = threading.Thread(target=lambda: others.extend(ctx.generate_parallel(prompts[1:], GREEDY)))
        caller.start()
        stream.close()
        caller.join()
        worker.join()
        assert stream.completion is None or stream.completion.finish_reason in ("cancelled", "stop", "length")
        assert [c.error for c in others] == [None] * 3
        for p, c in zip(prompts[1:], others):
            assert_greedy_alone(reference_llama, model, p, c)
        assert_idle(ctx)


def test_the_runs_of_waiting_prompts_are_decoded_in_room_a_step_leaves(model, reference_llama):
    """Two sequences, two instructions with two stories each: the second instruction is decoded in the first
    step, beside the first one, so its prompts find it ready when the sequences free: 3 steps, not 4."""
    prompts = annotation_prompts(STORIES[:2]) + annotation_prompts(STORIES[2:4], OTHER_INSTRUCTION)
    params = newrllama.SamplingParams(max_tokens=1)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=2, n_threads=2) as ctx:
        completions = ctx.generate_parallel(prompts, params)
        assert [c.error for c in completions] == [None] * 4
        assert ctx.engine_stats().n_steps == 3
        assert ctx.last_stats.n_cached_tokens >= (instruction_tokens(model) - 1
                                                  + instruction_tokens(model, OTHER_INSTRUCTION) - 1)
        for p, c in zip(prompts[1:], completions[1:]):
            assert_greedy_alone(reference_llama, model, p, c)
        assert_idle(ctx)


@pytest.mark.slow
def test_a_run_decoded_ahead_for_prompts_cancelled_before_their_turn(model, reference_llama):
    """Both sequences generate; a call of two prompts that share a long instruction waits, and its instruction
    is decoded in the room the steps leave. Cancelled before its turn, the call takes that run with it."""
    prompts = annotation_prompts(STORIES[:2], OTHER_INSTRUCTION)
    with newrllama.Context(model, n_ctx=8192, n_seq_max=2, n_threads=2, n_batch=64) as ctx:
        cache = ctx._scheduler.cache

        def decoding_ahead() -> bool:
            return any(p.ahead and not p.ready for p in cache.entries)

        async def main() -> None:
            streams = [asyncio.ensure_future(ctx.agenerate(f"{k} Once upon a time", newrllama.SamplingParams(
                max_tokens=60))) for k in range(2)]
            while ctx.engine_stats().n_running < 2:
                await asyncio.sleep(0.001)
            waiting = asyncio.ensure_future(ctx.agenerate_parallel(prompts, GREEDY))
            while not decoding_ahead():
                await asyncio.sleep(0.001)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            while decoding_ahead():
                await asyncio.sleep(0.001)
            assert not any(p.ahead for p in cache.entries)  # dropped, not finished
            assert ctx.engine_stats().n_running == 2  # while the others still ran
            await asyncio.gather(*streams)

        asyncio.run(main())
        c = ctx.generate(prompts[1], GREEDY)
        assert_greedy_alone(reference_llama, model, prompts[1], c)
        assert_idle(ctx)


def test_runs_all_pinned_by_waiting_prompts_leave_the_rest_to_decode_in_full(model, reference_llama):
    instructions = [f"Rule set {k}. " + OTHER_INSTRUCTION for k in range(3)]
    prompts = [p for instruction in instructions for p in annotation_prompts(STORIES[:2], instruction)]
    with newrllama.Context(model, n_ctx=8192, n_seq_max=6, n_threads=2,
                           scheduler_config=newrllama.SchedulerConfig(prefix_cache_sequences=2)) as ctx:
        completions = ctx.generate_parallel(prompts, GREEDY)
        assert [c.error for c in completions] == [None] * 6 and ctx.last_stats.n_fallbacks == 0
        # Two instructions got a run; the third one's prompts decoded it themselves.
        assert sorted(c.n_cached_tokens > 0 for c in completions) == [False] * 4 + [True] * 2
        for p, c in zip(prompts[::2], completions[::2]):
            assert_greedy_alone(reference_llama, model, p, c)
        assert_idle(ctx)


@pytest.mark.slow
def test_a_thousand_distinct_prompts_keep_the_cache_in_bounds(model):
    # Token prompts just long enough to be kept, each different from its second token on.
    filler = model.tokenize("the notes of the day", add_special=False)
    prompts = [[2, 1000 + k] + (filler * MIN_SHARED_TOKENS)[:MIN_SHARED_TOKENS - 2] for k in range(1000)]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=16, n_threads=2) as ctx:
        completions = ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=1))
        assert [c.error for c in completions] == [None] * 1000
        stats = ctx.engine_stats()
        assert stats.n_cached_prefixes <= ctx.scheduler_config.prefix_cache_sequences
        assert stats.n_prefix_evictions >= 1000 - ctx.scheduler_config.prefix_cache_sequences
        # None was reused, so kept runs go as soon as a step has fed a few tokens.
        assert ctx._scheduler.cache.kept_idle_tokens == ctx.n_batch // 8
        assert_idle(ctx)


@pytest.mark.slow
def test_a_texts_last_prompts_still_find_its_start_when_its_first_ones_end(model):
    """Six prompts per text (three questions, each in two listing orders), more than the sequences: the first
    prompts of a text end together and their runs are kept, which must not evict the text's run that its
    last prompts, still waiting for a sequence, need (it did: ~10% more tokens decoded)."""
    questions = ["Which of these topics is the story about", "Is the story good or bad news for the people in it",
                 "Where in the world does the story take place"]
    prompts = [f"Story {i}: {' '.join(STORIES[(i + k) % 10] for k in range(4))}\nQuestion: {q}? Answer with one "
               f"of: {order}.\nAnswer:" for i in range(32) for q in questions for order in ("a, b, c", "c, b, a")]
    tokens = [model.tokenize(p) for p in prompts]
    least = len({tuple(t[:k]) for t in tokens for k in range(1, len(t) + 1)})  # every distinct start once
    with newrllama.Context(model, n_ctx=16384, n_seq_max=16, n_threads=2) as ctx:
        completions = ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=1))
        assert [c.error for c in completions] == [None] * len(prompts)
        decoded = ctx.last_stats.n_prompt_tokens - ctx.last_stats.n_cached_tokens
        assert least <= decoded <= 1.05 * least
        assert_idle(ctx)
