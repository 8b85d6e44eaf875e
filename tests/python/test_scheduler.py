"""The scheduler: concurrent callers share one running batch, streaming, seeds, cancellation, closing."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import newrllama
from oracle import assert_greedy_alone
from samples import FRANCE, PROMPTS

GREEDY = newrllama.SamplingParams(max_tokens=16)


def run_threads(targets):
    """Starts one thread per target at the same moment; returns their results (or exceptions) in order."""
    results = [None] * len(targets)
    barrier = threading.Barrier(len(targets))

    def run(i):
        barrier.wait()
        try:
            results[i] = targets[i]()
        except BaseException as exc:  # reported to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.fixture
def ctx16(model):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=16, n_threads=2) as c:
        yield c


def test_threads_calling_generate_join_one_batch(ctx16, model, reference_llama):
    prompts = (PROMPTS * 2)[:16]
    steps_before = ctx16.engine_stats().n_steps
    completions = run_threads([lambda p=p: ctx16.generate(p, GREEDY) for p in prompts])
    steps = ctx16.engine_stats().n_steps - steps_before
    for prompt, c in zip(prompts, completions):
        assert isinstance(c, newrllama.Completion) and c.error is None, c
        assert c.n_prompt_tokens == len(model.tokenize(prompt))
        assert_greedy_alone(reference_llama, model, prompt, c)
    # Queued one after another they would take 16 x 16 steps; sharing the batch, about 16 and a few.
    assert steps <= GREEDY.max_tokens + 8, steps


def test_threads_calling_generate_parallel_get_their_own_answers_in_order(ctx16, model, reference_llama):
    jobs = [[f"{i} {p}" for p in PROMPTS] for i in range(4)]
    results = run_threads([lambda j=j: ctx16.generate_parallel(j, GREEDY) for j in jobs])
    for job, completions in zip(jobs, results):
        assert isinstance(completions, list) and len(completions) == len(job)
        for prompt, c in zip(job, completions):
            assert c.error is None and c.n_prompt_tokens == len(model.tokenize(prompt))
    for prompt, c in zip(jobs[2], results[2]):
        assert_greedy_alone(reference_llama, model, prompt, c)
    assert ctx16.n_used_cells() == 0


def test_a_failing_caller_does_not_disturb_the_others(ctx16, model):
    good = PROMPTS[:6]
    too_long = "word " * (ctx16.n_ctx_seq + 5)
    results = run_threads([
        lambda: ctx16.generate_parallel(good, newrllama.SamplingParams(max_tokens=8)),
        lambda: ctx16.generate_parallel([too_long, "", PROMPTS[0]], newrllama.SamplingParams(max_tokens=8)),
        lambda: ctx16.generate_parallel([PROMPTS[0], None]),
        lambda: ctx16.generate_parallel(PROMPTS[:2], [GREEDY]),
    ])
    assert [c.error for c in results[0]] == [None] * len(good)
    assert [c.n_prompt_tokens for c in results[0]] == [len(model.tokenize(p)) for p in good]
    assert [c.finish_reason for c in results[1]][:2] == ["error", "error"] and results[1][2].error is None
    assert isinstance(results[2], newrllama.InvalidArgumentError)
    assert isinstance(results[3], newrllama.InvalidArgumentError)
    assert ctx16.n_used_cells() == 0


def test_ctrl_c_cancels_only_the_interrupted_caller(model, ctrl_c_raises):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=8, n_threads=2) as ctx:
        other = []
        worker = threading.Thread(target=lambda: other.append(
            ctx.generate_parallel(PROMPTS[:4], newrllama.SamplingParams(max_tokens=40))))
        worker.start()
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            ctx.generate_parallel([f"{p} and so" for p in PROMPTS] * 4, newrllama.SamplingParams(max_tokens=300))
        assert time.perf_counter() - t0 < 30
        timer.join()
        worker.join()
        assert [c.finish_reason in ("stop", "length") for c in other[0]] == [True] * 4
        assert ctx.n_used_cells() == 0
        assert "Paris" in ctx.generate(FRANCE, newrllama.SamplingParams(max_tokens=6)).text


def test_eight_threads_fifty_calls_each(model):
    params = newrllama.SamplingParams(max_tokens=2)
    jobs = [[PROMPTS[k], PROMPTS[(k + 3) % 8]] for k in range(8)]
    with newrllama.Context(model, n_ctx=2048, n_seq_max=8, n_threads=2) as ctx:
        failures = []

        def worker(job):
            for _ in range(50):
                out = ctx.generate_parallel(job, params)
                if len(out) != 2 or any(c.error or c.n_gen_tokens != 2 for c in out) or \
                        [c.n_prompt_tokens for c in out] != [len(model.tokenize(p)) for p in job]:
                    failures.append(out)
            return True

        assert run_threads([lambda j=j: worker(j) for j in jobs]) == [True] * 8
        assert failures == [] and ctx.n_used_cells() == 0


def test_stream_yields_the_answer_piece_by_piece(ctx16):
    params = newrllama.SamplingParams(max_tokens=24)
    expected = ctx16.generate(PROMPTS[2], params)
    stream = ctx16.stream(PROMPTS[2], params)
    assert stream.completion is None
    pieces = list(stream)
    assert len(pieces) > 5 and "".join(pieces) == expected.text == stream.completion.text
    assert stream.completion.finish_reason == "length"


def test_stream_holds_back_a_possible_stop_string_and_joins_to_the_text(ctx16):
    params = newrllama.SamplingParams(max_tokens=40, stop=[" 7"])
    stream = ctx16.stream("1, 2, 3, 4,", params)
    pieces = list(stream)
    assert "".join(pieces) == " 5, 6," == stream.completion.text
    assert stream.completion.finish_reason == "stop"


def test_stream_of_multibyte_text_joins_exactly(ctx16):
    prompt = "Des mots en japonais: 東京, 大阪, 京都, 日本語, 富士山,"
    params = newrllama.SamplingParams(max_tokens=30)
    pieces = list(ctx16.stream(prompt, params))
    assert "".join(pieces) == ctx16.generate(prompt, params).text
    assert not any("\ufffd" in p for p in pieces[:-1])


def test_stream_shares_the_batch_and_closing_it_frees_its_sequence(ctx16):
    params = newrllama.SamplingParams(max_tokens=30)
    results = []
    worker = threading.Thread(target=lambda: results.append(ctx16.generate_parallel(PROMPTS, params)))
    with ctx16.stream(PROMPTS[5], newrllama.SamplingParams(max_tokens=500)) as stream:
        first = next(stream)
        worker.start()
        for _ in range(5):
            first += next(stream)
    assert stream.completion.finish_reason == "cancelled" and stream.completion.text.startswith(first)
    worker.join()
    assert all(c.error is None and c.n_gen_tokens == 30 for c in results[0])
    assert ctx16.n_used_cells() == 0


def test_stream_of_a_prompt_that_cannot_run_raises(ctx16):
    with pytest.raises(newrllama.GenerationError, match="empty"):
        list(ctx16.stream(""))
    with pytest.raises(newrllama.GenerationError, match="n_ctx"):
        list(ctx16.stream("word " * (ctx16.n_ctx_seq + 5)))
    with pytest.raises(newrllama.InvalidArgumentError):
        ctx16.stream(None)


def test_sampled_answers_do_not_depend_on_the_prompts_position(model):
    # One sequence: every prompt is decoded alone, so logits are the same in every call
    # (batch shapes change rounding) and only the seeds can make answers differ.
    params = newrllama.SamplingParams(max_tokens=12, temperature=1.0, seed=42)
    prompts = PROMPTS[:6] + [PROMPTS[1]]
    with newrllama.Context(model, n_ctx=512, n_seq_max=1, n_threads=2) as ctx:
        full = [c.text for c in ctx.generate_parallel(prompts, params)]
        subset = [c.text for c in ctx.generate_parallel([prompts[4], prompts[1], prompts[0]], params)]
        assert subset == [full[4], full[1], full[0]]
        # The second copy of a prompt draws its own stream; alone in a call it is the first copy again.
        assert full[6] != full[1]
        assert ctx.generate(prompts[1], params).text == full[1]
        other_seed = newrllama.SamplingParams(max_tokens=12, temperature=1.0, seed=43)
        assert [c.text for c in ctx.generate_parallel(prompts, other_seed)] != full


def test_closing_the_context_ends_running_calls_with_closed_error(model):
    ctx = newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2)
    outcome = []

    def call():
        try:
            ctx.generate_parallel(PROMPTS, newrllama.SamplingParams(max_tokens=400))
            outcome.append("completed")
        except newrllama.ClosedError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(1.0)
    ctx.close()
    worker.join()
    assert isinstance(outcome[0], newrllama.ClosedError)
    with pytest.raises(newrllama.ClosedError):
        ctx.generate("x")


def test_engine_reports_its_python_cost_per_step(ctx16):
    ctx16.generate_parallel(PROMPTS, GREEDY)
    stats = ctx16.engine_stats()
    assert stats.n_steps >= GREEDY.max_tokens and stats.t_step_s > 0
    # Per event, not per vocabulary entry: far below a step's decode time.
    assert 0 < stats.python_us_per_step < 0.1 * 1e6 * stats.t_step_s / stats.n_steps
