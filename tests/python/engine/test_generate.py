"""Single-prompt generation, sampling parameters and the command line."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

import newrllama
from helpers.samples import FRANCE


def test_embedded_model_knows_paris(ctx):
    completion = ctx.generate(FRANCE, newrllama.SamplingParams(max_tokens=8))
    assert "Paris" in completion.text
    assert completion.finish_reason in ("stop", "length") and completion.error is None


def test_greedy_is_reproducible(ctx):
    params = newrllama.SamplingParams(max_tokens=24)
    first = ctx.generate("Once upon a time", params)
    second = ctx.generate("Once upon a time", params)
    assert first.text == second.text and first.token_ids == second.token_ids
    assert first.n_gen_tokens == len(first.token_ids) == 24 and first.finish_reason == "length"


def test_generate_accepts_tokens(ctx, model):
    by_text = ctx.generate("The sun rises in the", newrllama.SamplingParams(max_tokens=6))
    by_tokens = ctx.generate(model.tokenize("The sun rises in the"), newrllama.SamplingParams(max_tokens=6))
    assert by_text.text == by_tokens.text


def test_text_matches_detokenized_tokens(ctx, model):
    c = ctx.generate("def fibonacci(n):", newrllama.SamplingParams(max_tokens=20))
    assert model.detokenize(c.token_ids) == c.text


@pytest.mark.parametrize("kwargs", [
    {"max_tokens": 0}, {"max_tokens": -1}, {"max_tokens": 2**40}, {"max_tokens": 1.5},
    {"temperature": -0.1}, {"temperature": math.nan}, {"temperature": math.inf},
    {"top_p": 1.5}, {"top_p": -0.1}, {"min_p": 2.0}, {"top_k": -1}, {"repeat_last_n": -2},
    {"penalty_repeat": 0.0}, {"penalty_repeat": math.nan}, {"seed": 2**32}, {"seed": 1.0},
    {"stop": [""]}, {"stop": [None]}, {"stop": ["x"] * (newrllama.engine.sampling.params.MAX_STOP + 1)},
])
def test_bad_sampling_params_raise(kwargs):
    with pytest.raises(newrllama.InvalidArgumentError):
        newrllama.SamplingParams(**kwargs)


def test_sampling_defaults_are_deterministic():
    p = newrllama.SamplingParams()
    assert p.temperature == 0.0 and p.seed >= 0
    assert newrllama.SamplingParams(stop="x").stop == ("x",)


@pytest.mark.slow
def test_huge_max_tokens_stops_at_context_end(model):
    with newrllama.Context(model, n_ctx=256, n_seq_max=4) as small:
        c = small.generate("1, 2, 3,", newrllama.SamplingParams(max_tokens=2**31 - 1))
        assert c.finish_reason == "length"
        # Every cell of the sequence is used; the last token is sampled but needs no cell.
        assert c.n_prompt_tokens + c.n_gen_tokens == small.n_ctx_seq + 1


@pytest.mark.slow
def test_command_line_generates():
    out = subprocess.run([sys.executable, "-m", "newrllama", "generate", FRANCE, "--max-tokens", "6"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "newrllama", "generate", "x", "--model", "/nonexistent.gguf"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "cannot open" in bad.stderr


@pytest.mark.slow
def test_module_level_call_bounds_the_context_for_huge_max_tokens(model):
    [c] = newrllama.generate_parallel(["1, 2, 3,"], model, max_tokens=2**31 - 1, n_seq_max=256)
    assert c.finish_reason == "length" and c.n_prompt_tokens + c.n_gen_tokens <= 65536 // 256 + 1
