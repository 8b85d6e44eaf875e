"""Messy input, load and memory: every prompt gets exactly one result, in order, and nothing crashes or leaks."""
from __future__ import annotations

import contextlib
import math
import resource
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import newrllama
from helpers.samples import FRANCE, PROMPTS

ROOT = Path(__file__).resolve().parents[3]
ONE_TOKEN = newrllama.SamplingParams(max_tokens=1)


@pytest.fixture(scope="module")
def small_ctx(model):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=2) as c:
        yield c


def test_messy_prompts_fail_alone(small_ctx, model):
    prompts = [
        "nul\x00byte inside",
        b"invalid \xff\xfe utf-8 \xc3",
        "lone surrogate \udcff here",
        "",
        "word " * 200_000,  # about 1 MB
        "\u202e right-to-left and emoji \U0001F600",
        PROMPTS[0],
    ]
    completions = small_ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=3))
    assert len(completions) == len(prompts)
    reasons = [c.finish_reason for c in completions]
    assert reasons[3] == "error" and "empty" in completions[3].error
    assert reasons[4] == "error" and "n_ctx" in completions[4].error
    for i in (0, 1, 2, 5, 6):
        assert completions[i].error is None and completions[i].n_gen_tokens == 3, (i, completions[i])
    assert small_ctx.n_used_cells() == 0


@pytest.mark.slow
def test_three_hundred_prompts_on_four_sequences(small_ctx, model):
    # Short prompts (the test is about bookkeeping, not prefill) whose lengths vary, neighbours always
    # differently (7919 % 5 = 4), so that a result handed to the wrong prompt shows in its prompt token count.
    # Each of the 4 sequences is taken and given back about 75 times, enough for a slot handed out twice or
    # never given back to show; every prompt costs a full-vocabulary output row, so more only adds minutes.
    n = 300
    prompts = [str(i) + " x" * ((i * 7919) % 5) for i in range(n)]
    completions = small_ctx.generate_parallel(prompts, ONE_TOKEN)
    assert len(completions) == n
    assert all(c.error is None and c.n_gen_tokens == 1 for c in completions)
    stats = small_ctx.last_stats
    assert stats.n_prompts == n and stats.n_gen_tokens == n and stats.n_failed == 0
    misplaced = [i for i, (p, c) in enumerate(zip(prompts, completions))
                 if c.n_prompt_tokens != len(model.tokenize(p))]
    assert misplaced == []
    assert small_ctx.n_used_cells() == 0


@pytest.mark.parametrize("bad", [
    {"max_tokens": 0}, {"max_tokens": -5}, {"max_tokens": 10**12}, {"temperature": -1.0},
    {"temperature": math.nan}, {"temperature": math.inf}, {"top_p": 1.01}, {"top_p": -0.5},
    {"seed": 2**32}, {"seed": 2**40}, {"max_tokens": None}, {"stop": 5},
])
def test_bad_parameters_raise_before_any_work(small_ctx, bad):
    with pytest.raises(newrllama.InvalidArgumentError):
        small_ctx.generate_parallel([PROMPTS[0]], newrllama.SamplingParams(**bad))
    with pytest.raises(newrllama.InvalidArgumentError):
        newrllama.generate_parallel([PROMPTS[0]], small_ctx.model, **bad)


def test_closed_context_and_freed_model(model):
    m = newrllama.Model()
    ctx = newrllama.Context(m, n_ctx=512, n_seq_max=2, n_threads=1)
    m.close()
    assert ctx.generate_parallel([FRANCE], newrllama.SamplingParams(max_tokens=4))[0].error is None
    ctx.close()
    with pytest.raises(newrllama.ClosedError):
        ctx.generate_parallel([FRANCE])
    with pytest.raises(newrllama.ClosedError):
        ctx.n_used_cells()


prompt_text = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.sampled_from(PROMPTS + ["", "\x00", "<start_of_turn>", "<end_of_turn>", "word " * 300]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(prompts=st.lists(prompt_text, max_size=9),
       max_tokens=st.integers(1, 4),
       temperature=st.sampled_from([0.0, 0.5, 1.5]),
       top_k=st.integers(0, 50),
       top_p=st.floats(0.0, 1.0),
       seed=st.integers(-1, 2**32 - 1),
       stop=st.lists(st.text(st.characters(blacklist_characters="\0"), min_size=1, max_size=3), max_size=2))
@pytest.mark.slow
def test_every_prompt_gets_exactly_one_result_in_order(small_ctx, model, prompts, max_tokens, temperature, top_k,
                                                        top_p, seed, stop):
    params = newrllama.SamplingParams(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                      seed=seed, stop=stop)
    completions = small_ctx.generate_parallel(prompts, params)
    assert len(completions) == len(prompts)
    for prompt, c in zip(prompts, completions):
        if c.finish_reason == "error":
            assert c.error and c.text == "" and c.n_gen_tokens == 0
            continue
        # The result belongs to this prompt: its prompt token count matches.
        assert c.n_prompt_tokens == len(model.tokenize(prompt))
        assert 0 <= c.n_gen_tokens <= max_tokens and c.error is None
        assert not any(s in c.text for s in stop)
    assert small_ctx.n_used_cells() == 0


THREAD_JOBS = [PROMPTS[i:i + 2] for i in range(4)]
TWO_TOKENS = newrllama.SamplingParams(max_tokens=2)


def _run_in_threads(expected, context_for):
    """Four threads, 20 calls each, every result compared with the expected texts in order."""
    failures = []

    def worker(k):
        with context_for(k) as ctx:
            for _ in range(20):
                got = ctx.generate_parallel(THREAD_JOBS[k], TWO_TOKENS)
                if [c.text for c in got] != expected[k]:
                    failures.append((k, got))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(THREAD_JOBS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def _small_context(model):
    return newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=1)


@pytest.mark.slow
def test_threads_sharing_one_context(model):
    with _small_context(model) as ctx:
        expected = [[c.text for c in ctx.generate_parallel(j, TWO_TOKENS)] for j in THREAD_JOBS]
        # The shared context must outlive the workers: they only borrow it.
        borrowed = contextlib.nullcontext(ctx)
        # Their calls share batches of varying shapes: batch-invariant, each gets the answer it gets alone.
        for k, completions in _run_in_threads(expected, lambda k: borrowed):
            for prompt, c, text in zip(THREAD_JOBS[k], completions, expected[k]):
                assert c.text == text
        assert ctx.n_used_cells() == 0


@pytest.mark.slow
def test_threads_with_their_own_contexts(model):
    with _small_context(model) as ctx:
        expected = [[c.text for c in ctx.generate_parallel(j, TWO_TOKENS)] for j in THREAD_JOBS]
    assert [(k, [c.text for c in got]) for k, got in _run_in_threads(expected, lambda k: _small_context(model))] == []


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.slow
def test_resident_memory_is_flat_over_100_calls(model):
    params = newrllama.SamplingParams(max_tokens=2)
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=2) as ctx:
        for i in range(100):
            if i == 20:
                after_warmup = _rss_mb()
            ctx.generate_parallel([PROMPTS[i % 8], PROMPTS[(i + 1) % 8], ""], params)
        growth = _rss_mb() - after_warmup
    print(f"RSS growth over calls 20-100: {growth:.2f} MB")
    assert growth < 5.0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the sanitizer harness")
def test_shim_is_clean_under_address_and_leak_sanitizer():
    run = subprocess.run(["bash", str(ROOT / "tests" / "c" / "run_sanitizers.sh")], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "leak_check: 0 failed expectations" in run.stdout
    assert "ERROR: AddressSanitizer" not in run.stderr and "LeakSanitizer" not in run.stderr
