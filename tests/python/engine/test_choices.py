"""choices: every answer is one of the labels, with probabilities from the log-probability of all its tokens."""
from __future__ import annotations

import pytest

import newrllama
from newrllama._capi import ffi, lib
from newrllama.engine.step.choices import label_paths
from helpers.oracle import assert_close_to_oracle, oracle_ends, oracle_probs
from helpers.samples import TOPIC_PROMPTS, TOPICS, check_labels

CAPITALS = newrllama.SamplingParams(choices=["Paris", "Berlin", "Rome", "Madrid"])


NESTED = ["crude", "crude oil", "crude oil prices"]  # each label's tokens begin the next one's
SHARED_STARTS = ["crude oil", "crude oil prices", "crude", "interest rates", "interest rates rise", "sports results"]


def copy_prompt(words: str) -> str:
    return f"Copy the words.\nWords: gold price\nCopy: gold price\nWords: {words}\nCopy:"


def chat_copy_prompt(model) -> str:
    return model.apply_chat_template([{"role": "user", "content": "Copy exactly: crude oil"}])


def capital_prompt(country: str) -> str:
    return f"The capital of Germany is Berlin. The capital of Italy is Rome. The capital of {country} is"


def test_single_token_labels_match_the_oracle(ctx4, model, reference_llama):
    countries = ["France", "Spain", "Germany", "Italy"]
    completions = ctx4.generate_parallel([capital_prompt(c) for c in countries], CAPITALS)
    check_labels(completions, CAPITALS)
    assert [c.text for c in completions] == ["Paris", "Madrid", "Berlin", "Rome"]
    for country, c in zip(countries, completions):
        assert_close_to_oracle(c, oracle_probs(reference_llama, model, capital_prompt(country), CAPITALS.choices))


def test_multi_token_labels_are_scored_on_every_token(ctx4, model, reference_llama):
    completions = ctx4.generate_parallel(TOPIC_PROMPTS, TOPICS)
    check_labels(completions, TOPICS)
    assert [c.text for c in completions[1:]] == ["crude oil", "interest rates"]
    assert completions[2].n_gen_tokens == len(model.tokenize(" interest rates", add_special=False)) > 1
    for prompt, c in zip(TOPIC_PROMPTS, completions):
        assert_close_to_oracle(c, oracle_probs(reference_llama, model, prompt, TOPICS.choices))


def test_labels_whose_tokens_start_another_share_its_rows():
    # Tokens of "very good", "very good indeed", "very bad", "good", "not bad at all", "not bad", "no";
    # 99 ends an answer.
    tokens = [[7, 1], [7, 1, 9], [7, 2], [1], [4, 2, 5, 6], [4, 2], [3]]
    paths = label_paths(tokens, [99])
    assert [p.body for p in paths] == [(4, 2, 5, 6), (7, 1, 9), (7, 2), (1,), (3,)]
    assert paths[0].scored == [(0, 2, 4, False), (0, 2, 5, False), (1, 5, 4, False), (1, 99, 5, True),
                               (2, 6, 4, False), (3, 99, 4, True)]
    assert paths[1].scored == [(0, 1, 0, False), (0, 1, 1, False), (1, 9, 1, False), (1, 99, 0, True),
                               (2, 99, 1, True)]
    assert [p.scored for p in paths[3:]] == [[(0, 99, 3, True)], [(0, 99, 6, True)]]
    assert [(label, len(idx)) for label, idx in paths[0].ends] == [(5, 1), (4, 1)]


def test_every_ending_token_counts_for_the_end():
    ends = label_paths([[5]], [98, 99])[0]
    assert ends.scored == [(0, 98, 0, True), (0, 99, 0, True)] and ends.ends == [(0, [0, 1])]


def test_a_label_that_begins_another_can_win(ctx4, model, reference_llama):
    """Without the end of the answer in the score, 'crude' would win every time: P(' crude oil') <= P(' crude')."""
    params = newrllama.SamplingParams(choices=NESTED)
    prompts = [copy_prompt(w) for w in NESTED]
    completions = ctx4.generate_parallel(prompts, params)
    assert [c.text for c in completions] == NESTED
    for prompt, c in zip(prompts, completions):
        assert_close_to_oracle(c, oracle_probs(reference_llama, model, prompt, NESTED))


def test_a_chat_prompt_ends_its_answer_with_the_end_of_turn(ctx4, model, reference_llama):
    ends = model.vocab.answer_ends
    chat = chat_copy_prompt(model)
    end_of_turn = model.tokenize("<end_of_turn>", add_special=False)
    assert len(end_of_turn) == 1 and ends.after(model.tokenize(chat))[0] == end_of_turn[0]
    assert model.tokenize("\n", add_special=False)[0] in ends.after(model.tokenize("Label:"))
    assert sorted(ends.after(model.tokenize(chat))) == oracle_ends(reference_llama, chat=True)
    assert sorted(ends.after(model.tokenize("Label:"))) == oracle_ends(reference_llama, chat=False)
    c = ctx4.generate(chat, newrllama.SamplingParams(choices=NESTED))
    assert_close_to_oracle(c, oracle_probs(reference_llama, model, chat, NESTED, chat=True))


def test_labels_sharing_tokens_score_as_if_alone(ctx4, model, reference_llama):
    shared = newrllama.SamplingParams(choices=SHARED_STARTS)
    assert len(label_paths([model.tokenize(" " + c, add_special=False) for c in shared.choices], [1])) == 3
    completions = ctx4.generate_parallel(TOPIC_PROMPTS, shared)
    check_labels(completions, shared)
    for prompt, c in zip(TOPIC_PROMPTS, completions):
        assert_close_to_oracle(c, oracle_probs(reference_llama, model, prompt, shared.choices))


def test_token_prompts_get_the_leading_space_their_text_would(model):
    """A prompt given as tokens ends in ':' (no space): its labels follow a space, as for the text."""
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        as_text = ctx.generate_parallel(TOPIC_PROMPTS, TOPICS)
        as_tokens = ctx.generate_parallel([model.tokenize(s) for s in TOPIC_PROMPTS], TOPICS)  # starts from the cache
    for t, k in zip(as_text, as_tokens):
        assert (k.n_gen_tokens, k.text, k.choice_probs) == (t.n_gen_tokens, t.text, t.choice_probs)


def test_choices_mix_with_free_prompts_and_leave_nothing_behind(ctx4, model):
    free = newrllama.SamplingParams(max_tokens=6)
    prompts = TOPIC_PROMPTS + ["Once upon a time", capital_prompt("France")]
    completions = ctx4.generate_parallel(prompts, [TOPICS, TOPICS, TOPICS, free, CAPITALS])
    check_labels(completions[:3], TOPICS)
    check_labels(completions[4:], CAPITALS)
    assert completions[3].choice_probs is None and completions[3].n_gen_tokens == 6
    assert ctx4.n_used_cells() == 0
    lo, hi = ffi.new("int32_t *"), ffi.new("int32_t *")
    n_all = ctx4.n_seq_max + lib.newrllama_context_n_seq_extra(ctx4.handle)
    kept = {p.seq: p.n_tokens for p in ctx4._scheduler.cache.entries}  # runs the prefix cache keeps on purpose
    for seq in range(ctx4.n_seq_max, n_all):
        assert lib.newrllama_seq_pos_range(ctx4.handle, seq, lo, hi, ffi.NULL) == lib.NEWRLLAMA_OK
        assert (lo[0], hi[0]) == ((0, kept[seq] - 1) if seq in kept else (-1, -1))


@pytest.mark.slow
def test_more_labels_than_scratch_sequences(model):
    labels = [f"topic number {k}" for k in range(150)]
    params = newrllama.SamplingParams(choices=labels)
    with newrllama.Context(model, n_ctx=2048, n_seq_max=2, n_threads=2) as ctx:
        completions = ctx.generate_parallel(["Pick a topic. The answer is", "Another one:"], params)
        check_labels(completions, params)
        assert ctx.n_used_cells() == 0


def test_choices_share_a_cached_instruction(model):
    instruction = ("Classify the news story into one topic. Topics: acquisition (a company buys another), "
                   "crude oil (oil prices and production), interest rates (central banks), sports results. ") * 2
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        completions = ctx.generate_parallel([instruction + s for s in TOPIC_PROMPTS], TOPICS)
        check_labels(completions, TOPICS)
        assert sorted(c.n_cached_tokens > 50 for c in completions) == [False] + [True] * (len(TOPIC_PROMPTS) - 1)


def test_a_failing_label_decode_fails_only_its_prompt(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        first_scratch = ctx.n_seq_max + newrllama.SchedulerConfig().prefix_cache_sequences
        ctx._inject_decode_failure(2, first_scratch)  # the step scoring the first multi-token label
        completions = ctx.generate_parallel(TOPIC_PROMPTS, TOPICS)
        failed = [c for c in completions if c.finish_reason == "error"]
        assert len(failed) == 1 and "scoring a label" in failed[0].error
        check_labels([c for c in completions if c.finish_reason != "error"], TOPICS)
        assert ctx.n_used_cells() == 0
        check_labels(ctx.generate_parallel(TOPIC_PROMPTS, TOPICS), TOPICS)


@pytest.mark.parametrize("choices,message", [
    ([], "2 to 1024"), (["only"], "2 to 1024"), ([f"label {k}" for k in range(10_000)], "2 to 1024"),
    (["a", "a"], "more than once"), (["a", " "], "non-blank"), (["a", "b\0c"], "NUL"), (["a", 3], "non-blank"),
    ("ab", "not a single string"),
])
def test_bad_choice_lists_are_clear_errors(choices, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.SamplingParams(choices=choices)


def test_labels_that_do_not_fit_fail_alone(model):
    with newrllama.Context(model, n_ctx=256, n_seq_max=1, n_threads=2) as ctx:
        long_label = "word " * 300
        params = newrllama.SamplingParams(choices=["short", long_label])
        completions = ctx.generate_parallel([capital_prompt("France"), capital_prompt("Spain")], [params, CAPITALS])
        assert completions[0].finish_reason == "error" and "longest label" in completions[0].error
        assert completions[1].text == "Madrid"


def test_tiny_contexts_keep_working_and_explain_what_they_cannot_do(model):
    # n_batch caps how many sequences llama.cpp can hold; here none is left for scratch work.
    with newrllama.Context(model, n_ctx=64, n_seq_max=4, n_batch=4, n_threads=2) as ctx:
        assert lib.newrllama_context_n_seq_extra(ctx.handle) == 0
        completions = ctx.generate_parallel(TOPIC_PROMPTS[:2] + [capital_prompt("Spain")],
                                            [TOPICS, CAPITALS, newrllama.SamplingParams(max_tokens=2)])
        assert all(c.finish_reason == "error" and "scratch sequence" in c.error for c in completions[:2])
        assert completions[2].text.strip().startswith("Madrid")
    assert newrllama.generate_parallel([capital_prompt("France")], max_tokens=3)[0].error is None
