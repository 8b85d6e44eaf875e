"""The scheduler: concurrent callers share one running batch, streaming, seeds, cancellation, closing."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import newrllama
from newrllama.engine.step.request import Request
from newrllama.engine.step.step_assembly import StepAssembly
from helpers.oracle import assert_greedy_alone
from helpers.samples import FRANCE, PROMPTS

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


@pytest.mark.slow
def test_eight_threads_twelve_calls_each(model):
    params = newrllama.SamplingParams(max_tokens=2)
    jobs = [[PROMPTS[k], PROMPTS[(k + 3) % 8]] for k in range(8)]
    with newrllama.Context(model, n_ctx=2048, n_seq_max=8, n_threads=2) as ctx:
        failures = []

        def worker(job):
            for _ in range(12):
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


def record_each_step(monkeypatch, what):
    """what(step, active) for every step once it is built (step: the scheduler's StepAssembly, with its holders
    and slots; active: the requests by sequence); returns the list they go in."""
    steps = []
    build = StepAssembly.build

    def recording(self, active, waiting, n_steps) -> bool:
        prefill = build(self, active, waiting, n_steps)
        steps.append(what(self, active))
        return prefill
    monkeypatch.setattr(StepAssembly, "build", recording)
    return steps


def record_steps(monkeypatch):
    """Per step: (generated tokens, prompt tokens, generating requests left out, prefilling requests left out
    (by the rule or for want of room))."""
    def sides(step, active):
        taken = [h for h in step.holders if isinstance(h, Request)]
        running = [r for r in active if r is not None and not r.awaiting_prefix]
        generating = [r for r in running if r.n_past >= r.n_prompt]
        n_gen = sum(1 for r in generating if r in taken)
        n_all = sum(step.slots[i].n_tokens for i in range(len(step.holders)))
        return (n_gen, n_all - n_gen, len(generating) - n_gen,
                sum(1 for r in running if r.n_past < r.n_prompt and r not in taken))
    return record_each_step(monkeypatch, sides)


@pytest.mark.slow
def test_generated_tokens_ride_every_step_and_answers_are_each_prompt_alone(model, monkeypatch):
    """Every step carries the token of every generating prompt beside other prompts' prefill, and each answer
    is the bits of its prompt decoded alone."""
    steps = record_steps(monkeypatch)
    prompts = [f"{p} " + " ".join(PROMPTS[(i + k) % len(PROMPTS)] for k in range(2 + i % 5)) * 3
               for i, p in enumerate(PROMPTS * 2)]
    params = [newrllama.SamplingParams(max_tokens=3 + i % 6) for i in range(len(prompts))]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=8, n_batch=256, n_threads=2) as ctx:
        completions = ctx.generate_parallel(prompts, params)
    assert all(gen_out == 0 for _, _, gen_out, _ in steps) and any(n_gen and n_prompt for n_gen, n_prompt, _, _ in steps)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=1, n_batch=256, n_threads=2) as alone:
        for prompt, p, c in list(zip(prompts, params, completions))[::3]:
            assert c.error is None and c.token_ids == alone.generate(prompt, p).token_ids


def test_prompts_are_prefilled_in_the_order_they_were_admitted(model, monkeypatch):
    """A prompt still being prefilled is not passed over by one admitted after it to a lower sequence (in
    sequence order, prompts that kept arriving on the low sequences would starve one on a high one)."""
    def prefill_order(step, active):
        """Admission numbers of the prompts that took prefill tokens, and of those left out."""
        taken = [h for h in step.holders if isinstance(h, Request) and h.n_past < h.n_prompt]
        left = [r for r in active
                if r is not None and not r.awaiting_prefix and r.n_past < r.n_prompt and r not in taken]
        return [r.admitted for r in taken], [r.admitted for r in left]
    steps = record_each_step(monkeypatch, prefill_order)
    prompts = [f"{i}. {FRANCE}" + f" {PROMPTS[i % len(PROMPTS)]}" * 6 for i in range(8)]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_batch=64, n_threads=2) as ctx:
        completions = ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=1))
    assert all(c.error is None and c.n_gen_tokens == 1 for c in completions)
    assert sum(1 for taken, left in steps if taken and left) >= 4, steps
    assert all(max(taken) < min(left) for taken, left in steps if taken and left), steps


def test_a_streamed_prompt_is_prefilled_before_prompts_admitted_earlier(model, monkeypatch):
    """Someone reads a stream as it comes: its prompt does not wait behind long prompts already being
    prefilled, and they go on in their order after it."""
    def prefill_order(step, active):
        """Admission numbers of the prompts that took prefill tokens, of the stream's and of the others'."""
        taken = [h.admitted for h in step.holders if isinstance(h, Request) and h.n_past < h.n_prompt]
        prefilling = [r for r in active if r is not None and r.n_past < r.n_prompt]
        return (taken, [r.admitted for r in prefilling if r.streamed],
                [r.admitted for r in prefilling if not r.streamed])
    steps = record_each_step(monkeypatch, prefill_order)
    long = [f"{i}. {FRANCE}" + f" {PROMPTS[i]}" * 16 for i in range(3)]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_batch=64, n_threads=2) as ctx:
        batch = threading.Thread(target=ctx.generate_parallel, args=(long, newrllama.SamplingParams(max_tokens=1)))
        batch.start()
        while ctx.engine_stats().n_steps < 2:
            time.sleep(0.01)
        with ctx.stream(PROMPTS[3], newrllama.SamplingParams(max_tokens=4)) as s:
            text = "".join(s)
        batch.join()
    assert s.completion.n_gen_tokens == 4 and text == s.completion.text
    beside_others = [(taken, streamed) for taken, streamed, others in steps if streamed and others]
    assert beside_others and all(taken[0] == streamed[0] for taken, streamed in beside_others), steps
    assert all(taken == sorted(taken) for taken, streamed, _ in steps if not streamed), steps


def test_a_streamed_prompt_is_admitted_before_waiting_prompts(model):
    """A stream opened while a call's prompts wait for a sequence takes the next free one; the call's
    prompts all run after it."""
    prompts = [f"{i}. {FRANCE}" + f" {PROMPTS[i % len(PROMPTS)]}" * 12 for i in range(6)]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=2, n_batch=64, n_threads=2) as ctx:
        results = []
        batch = threading.Thread(target=lambda: results.extend(
            ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=2))))
        batch.start()
        while ctx.engine_stats().n_steps < 2:
            time.sleep(0.01)
        with ctx.stream(PROMPTS[0], newrllama.SamplingParams(max_tokens=4)) as s:
            text = "".join(s)
        waiting_after_stream = ctx.engine_stats().n_waiting
        batch.join()
    assert s.completion.n_gen_tokens == 4 and text == s.completion.text
    assert waiting_after_stream >= 2, waiting_after_stream
    assert [c.error for c in results] == [None] * 6 and all(c.n_gen_tokens == 2 for c in results)


def test_a_steady_flow_of_streams_does_not_starve_a_waiting_prompt(model):
    """Two clients open streams one after another on one sequence, so a stream always waits; a prompt that is
    only waited on is admitted once it has waited max_steps_behind_streams steps, while the streams still flow
    (with streams always first it ran only after the last of them)."""
    n_streams = 12
    finished = []
    with newrllama.Context(model, n_ctx=2048, n_seq_max=1, n_batch=64, n_threads=2,
                           scheduler_config=newrllama.SchedulerConfig(max_steps_behind_streams=4)) as ctx:
        def client(k):
            for i in range(n_streams):
                with ctx.stream(f"{k}.{i} {PROMPTS[i % len(PROMPTS)]}", newrllama.SamplingParams(max_tokens=4)) as s:
                    "".join(s)
                finished.append(s.completion.error)
        clients = [threading.Thread(target=client, args=(k,)) for k in range(2)]
        for t in clients:
            t.start()
        while len(finished) < 2:
            time.sleep(0.01)
        (batch,) = ctx.generate_parallel([FRANCE], newrllama.SamplingParams(max_tokens=2))
        streams_done_at_batch_end = len(finished)
        for t in clients:
            t.join()
    assert batch.error is None and batch.n_gen_tokens == 2
    assert finished == [None] * 2 * n_streams
    assert streams_done_at_batch_end < 2 * n_streams - 4, streams_done_at_batch_end


def test_a_steps_label_paths_sit_on_consecutive_sequences_longest_first(model, monkeypatch):
    """llama.cpp cuts a step over a stream per sequence into passes of consecutive sequences with equal token
    counts: a step's label paths go on ascending scratch sequences, longest body first (every step, also once
    scratch sequences came back out of order), so that they take as many passes as the longest body."""
    from newrllama.engine.step.choices import LabelJob

    def label_jobs(step, active):
        return [(h.seq, len(h.path.body)) for h in step.holders if isinstance(h, LabelJob)]
    recorded = record_each_step(monkeypatch, label_jobs)
    labels = ["crude oil", "oil", "interest rates", "sport", "grain", "shipping news", "money", "trade balance"]
    params = newrllama.SamplingParams(choices=labels)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=8, n_threads=2) as ctx:
        for _ in range(2):
            completions = ctx.generate_parallel([f"{p} The topic is" for p in PROMPTS[:6]], params)
            assert all(c.error is None and c.text in labels for c in completions)
    steps = [s for s in recorded if s]
    assert len(steps) >= 4 and any(len({n for _, n in s}) > 1 for s in steps)
    for s in steps:
        seqs, lengths = [seq for seq, _ in s], [n for _, n in s]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), s
        assert lengths == sorted(lengths, reverse=True), s
