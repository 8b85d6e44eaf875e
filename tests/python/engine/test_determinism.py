"""Same input, same output: a prompt's tokens and probabilities are the same bits whatever ran before on
the context, whoever else shares its steps, whether its start came from the prefix cache, and in another
process. Every comparison is exact (==), never within a margin."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import List

import pytest

import newrllama
from helpers.callers import call_from_threads

SUBJECTS = ["a lighthouse keeper", "a lost dog", "the last train", "a quiet village", "an old clock",
            "a young chef", "a broken bridge", "the winter sea", "a paper kite", "a stubborn goat",
            "the night market", "a silver key", "a lonely robot", "the red door", "a summer storm",
            "a forgotten letter"]
PROMPTS = [f"Here is a short story about {s}:" for s in SUBJECTS]
OTHER = [f"A recipe for {s} soup:" for s in ("tomato", "onion", "pumpkin", "lentil", "fish", "bean")]
GREEDY = newrllama.SamplingParams(max_tokens=16)
SEEDED = newrllama.SamplingParams(max_tokens=16, temperature=0.9, top_p=0.95, seed=1234)
INSTRUCTION = ("You sort short news items by topic. Read the item, think about what it is mainly about rather "
               "than what it mentions in passing, and answer with the topic only.\n\nItem: ")
ITEMS = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
         "Heavy rain and strong winds are expected tomorrow.", "The minister resigned after the vote.",
         "A new vaccine cut infections by half in the trial.", "Oil prices rose as supply tightened."]
LABELS = ["sports", "business", "weather", "politics", "health"]
CHOICES = newrllama.SamplingParams(choices=LABELS)


def answers(completions) -> List[tuple]:
    """Everything a caller reads of an answer, as exact values."""
    return [(c.text, tuple(c.token_ids), c.n_gen_tokens, c.finish_reason,
             tuple(sorted(c.choice_probs.items())) if c.choice_probs else None) for c in completions]


def context(model, **kw) -> newrllama.Context:
    return newrllama.Context(model, **{"n_ctx": 8192, "n_seq_max": 16, "n_threads": 2, **kw})


def busy(ctx) -> None:
    """Other callers' work on the context, from threads at once: it leaves cached runs and used streams."""
    call_from_threads(lambda p: ctx.generate_parallel(p, GREEDY), OTHER, 3)


@pytest.fixture(scope="module")
def reference(model):
    """The prompts of this file on a fresh context, one call each."""
    with context(model) as ctx:
        return {"greedy": answers(ctx.generate_parallel(PROMPTS, GREEDY)),
                "seeded": answers(ctx.generate_parallel(PROMPTS[:6], SEEDED)),
                "choices": answers(ctx.generate_parallel([INSTRUCTION + t + "\nTopic:" for t in ITEMS], CHOICES))}


@pytest.mark.slow
def test_the_same_call_after_other_work_on_the_context(model, reference):
    with context(model) as ctx:
        ctx.generate_parallel(PROMPTS[5:], GREEDY)  # the cache now holds runs of these prompts
        busy(ctx)
        assert answers(ctx.generate_parallel(PROMPTS, GREEDY)) == reference["greedy"]
        busy(ctx)
        assert answers(ctx.generate_parallel(PROMPTS[:6], SEEDED)) == reference["seeded"]
        assert answers(ctx.generate_parallel([INSTRUCTION + t + "\nTopic:" for t in ITEMS], CHOICES)) \
            == reference["choices"]
        again = answers(ctx.generate_parallel(PROMPTS, GREEDY))  # every start now comes from the cache
        assert ctx.last_stats.n_cached_tokens > 0 and again == reference["greedy"]


def test_threads_of_callers_against_one_call(model, reference):
    with context(model) as ctx:
        assert call_from_threads(lambda p: answers(ctx.generate_parallel(p, GREEDY)), PROMPTS, 4) == reference["greedy"]


@pytest.mark.slow
def test_each_prompt_alone_against_the_batch(model, request):
    if model.n_gpu_layers:  # a run on a device (scripts/vulkan_on_lavapipe.sh): the context warns and records it
        pytest.skip("batch invariance is not claimed on offloaded layers; bench_determinism measures it there")
    reference = request.getfixturevalue("reference")
    with context(model, n_seq_max=2) as ctx:
        alone = [answers([ctx.generate(p, GREEDY)])[0] for p in PROMPTS[:6]]
    assert alone == reference["greedy"][:6]
    with context(model) as ctx:
        assert [answers([ctx.generate(p, SEEDED)])[0] for p in PROMPTS[:3]] == reference["seeded"][:3]


def test_a_start_from_the_cache_against_a_context_without_the_cache(model, reference):
    prompts = [INSTRUCTION + t + "\nTopic:" for t in ITEMS]
    with context(model, prefix_cache=False) as plain:
        assert answers(plain.generate_parallel(prompts, CHOICES)) == reference["choices"]
        assert answers(plain.generate_parallel(PROMPTS[:8], GREEDY)) == reference["greedy"][:8]
    with context(model) as cached:
        for t in ITEMS:  # one at a time: every item after the first starts from the instruction's run
            cached.generate(INSTRUCTION + t + "\nTopic:", CHOICES)
        assert cached.last_stats.n_cached_tokens > 0
        assert answers(cached.generate_parallel(prompts, CHOICES)) == reference["choices"]


@pytest.mark.slow
def test_annotate_repeats_bit_for_bit_after_other_work(model):
    texts = ITEMS * 2
    with context(model, n_seq_max=8) as ctx:
        first = newrllama.annotate(texts, LABELS, "Give the topic of the news item.", context=ctx)
        busy(ctx)
        ctx.generate_parallel([INSTRUCTION + t for t in ITEMS[::-1]], GREEDY)
        second = newrllama.annotate(texts, LABELS, "Give the topic of the news item.", context=ctx)
    with context(model, n_seq_max=3) as fresh:
        third = newrllama.annotate(texts, LABELS, "Give the topic of the news item.", context=fresh)
    view = [[(a.label, a.probs, a.raw_probs) for a in run] for run in (first, second, third)]
    assert view[0] == view[1] == view[2]


@pytest.mark.skipif(os.environ.get("NEWRLLAMA_TEST_INSTRUCT") != "true", reason="instruct model not fetched")
def test_a_model_without_a_sliding_window_repeats_too():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    from fetch_instruct_model import instruct_model_path
    with newrllama.Model(instruct_model_path()) as m, context(m) as ctx:
        first = answers(ctx.generate_parallel(PROMPTS[:8], GREEDY))
        busy(ctx)
        assert answers(ctx.generate_parallel(PROMPTS[:8], GREEDY)) == first
        assert [answers([ctx.generate(p, GREEDY)])[0] for p in PROMPTS[:3]] == first[:3]


SCRIPT = """
import hashlib, json, newrllama, sys
with newrllama.Model() as m, newrllama.Context(m, n_ctx=4096, n_seq_max=8, n_threads=int(sys.argv[1])) as ctx:
    out = ctx.generate_parallel(json.loads(sys.argv[2]), newrllama.SamplingParams(max_tokens=12))
    print(json.dumps([[c.text, c.token_ids] for c in out]))
"""


@pytest.mark.slow
def test_two_fresh_processes_and_thread_counts_give_the_same_bits():
    def run(threads: int) -> list:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(threads), json.dumps(PROMPTS[:8])],
                              capture_output=True, text=True, check=True, timeout=600)
        return json.loads(done.stdout)
    assert run(2) == run(2) == run(1)


def test_the_build_carries_the_patches_and_says_so(model):
    """Without the attention patch, batch_invariant=True attends bf16 cells one by one; without the matmul patches
    (each compiled in only where the CPU has its unit), tinyBLAS takes the Q5_0 and Q8_0 weights and ggml's forced
    tiled kernel the K-quants: the same rules, other bits (and slower); without tiled-forced-by-default ggml's tiled
    kernel is not forced unless the environment says so; the fingerprint must tell a reader which they have."""
    from newrllama._lib import ffi, lib
    from newrllama.engine.llama.system import _features
    cpu = _features(ffi.string(lib.newrllama_system_info()).decode())
    vnni = cpu.get("AVX512") == "1" and cpu.get("AVX512_VNNI") == "1"
    avx2 = cpu.get("AVX2") == "1" and cpu.get("FMA") == "1"
    vbmi = cpu.get("AVX512_VBMI") == "1"
    expected = ", ".join(sorted(["flash-attn-bf16-blocked"] + (["q0-gemm-vnni"] if vnni else ["q0-gemm-avx2"] if avx2 else [])
                                + (["quant-gemm-avx2", "quantize-q8_K-avx2"] if avx2 else [])
                                + (["quant-gemm-amx"] if vnni and vbmi and avx2 else [])
                                + ["tiled-forced-by-default"]))
    with context(model) as ctx:
        record = ctx.engine_stats().determinism
    assert record.build.endswith(f"; llama.cpp patch: {expected}")
    backends = ", ".join(["cpu", *newrllama.system_info().gpu_backends])
    assert record.build.startswith(f"llama-cpp-python {newrllama.system_info().llama_cpp_python} ({backends}); ")
    assert (record.backend, record.n_gpu_layers, record.device) == (model.backend, model.n_gpu_layers, model.device)
    devices = newrllama.system_info().devices
    if model.n_gpu_layers:  # a run on a device: the record names it
        assert model.backend in backends and all(d.name in model.device for d in devices if d.kind != "cpu")
    else:
        cpu = next(d for d in devices if d.kind == "cpu")
        assert (record.backend, record.device) == ("cpu", f"{cpu.name}: {cpu.description}")


def test_batch_invariance_on_offloaded_layers_is_not_claimed(model, monkeypatch):
    """The GPU backends' kernels are not batch-invariant: a model whose layers are offloaded (faked here on the CPU
    build) gets a context that warns and records batch_invariant=False, with the backend and layers."""
    monkeypatch.setattr(model, "n_gpu_layers", 20)
    monkeypatch.setattr(model, "backend", "cuda")
    with pytest.warns(newrllama.DeterminismWarning, match="runs 20 layers on cuda.*n_gpu_layers=0"):
        with context(model) as ctx:
            record = ctx.engine_stats().determinism
    assert (record.batch_invariant, record.backend, record.n_gpu_layers) == (False, "cuda", 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with context(model, batch_invariant=False) as ctx:  # nothing claimed, nothing to warn about
            assert ctx.engine_stats().determinism.n_gpu_layers == 20


def test_batch_invariant_keeps_bf16_cells_and_false_is_reported(model):
    from newrllama._lib import lib
    with context(model) as ctx:
        assert lib.newrllama_context_batch_invariant(ctx.handle) == 1 and ctx.engine_stats().determinism.batch_invariant
    with context(model, batch_invariant=False) as ctx:
        assert lib.newrllama_context_batch_invariant(ctx.handle) == 0
        assert ctx.batch_invariant is False and ctx.engine_stats().determinism.batch_invariant is False
        assert all(c.error is None for c in ctx.generate_parallel(PROMPTS[:4], GREEDY))
    with pytest.raises(newrllama.InvalidArgumentError, match="batch_invariant"):
        context(model, batch_invariant="yes")
