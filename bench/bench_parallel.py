"""Generation throughput of newrllama's scheduler, side by side with its C driver and llama.cpp's own tool.

For 1, 4, 8, 16, 32 prompts of 16 tokens each, 48 new greedy tokens per prompt, 2 threads, the
embedded model (or --model), generated tokens per second with prefill included, for:
  - Context.generate_parallel: the Python scheduler driving the C step primitives,
    with the scheduler's own Python time per step (us);
  - the C driver (newrllama_generate_parallel_ex) over the same primitives;
  - llama.cpp's llama-batched-bench built from the llama.cpp that the pinned llama-cpp-python
    vendors (bench/build_llama_tools.sh, AMX off; -npp 16 -t 2), with its default KV layout
    (a stream per sequence, as our contexts) and with -kvu (one stream);
  - a loop of Context.generate and one of llama-cpp-python's create_completion;
  - R's generate_parallel at 16 prompts, against the Python call on the same texts.
Equal work: our 48 tokens of a prompt take its prefill and 47 decode steps (the last token is
sampled, never decoded), and every step of llama-batched-bench decodes, so it runs -ntg 47 and
its rate counts B x (TG + 1) generated tokens.
Warm-up: every engine, in the context or process it is then timed in, first runs the same shape
at full width: the prefill of every prompt and one decode step of all of them (ours: the same
prompts with max_tokens 2, on a context without the prefix cache, so that the timed call prefills
every prompt as the references do: the results record the cached tokens, 0;
llama-batched-bench: -ntg 1,47, its first row dropped, as its own warm-up is one 16-token sequence).
Each repeat runs the engines in turn, the first rotating between repeats; rates are medians over
the repeats and ratios medians of the ratios within a repeat. Then 16 threads each calling
generate() with one prompt against one generate_parallel call of the same 16 prompts (in turn on
one warmed context), and the drift over --drift-calls calls of 8 prompts.

    .venv/bin/python bench/bench_parallel.py [--sizes 1 4 8 16 32] [--repeats 3] [--drift-calls 100]
        [--no-r] [--no-llama-cpp] [--no-generate-loop] [--no-batched-bench] [--model qwen2.5-coder-1.5b]
Writes bench/results/parallel-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import newrllama
from bench_models import add_model_argument, model_label, model_path
from bench_results import write_results
from in_turn import Run, median_of, paired_median, run_in_turn
from llama_tools import llama_tool_binary, run_batched_bench_warm
from together import run_together
from newrllama._capi import ffi, lib

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["the ocean", "mountains", "a library", "winter", "coffee", "trains", "the moon", "gardens",
          "music", "rivers", "bread", "cities", "forests", "bicycles", "the desert", "painting",
          "a lighthouse", "rain", "chess", "honey", "volcanoes", "bridges", "owls", "the market",
          "islands", "clocks", "tea", "snow", "castles", "whales", "autumn", "a small village"]
TEXTS = [f"Here is a short story about {t}: once upon a time, long ago, there was a" for t in TOPICS]
PROMPT_TOKENS = 16  # as llama-batched-bench -npp 16: equal lengths, so a prefill step is one pass
N_THREADS = 2
MAX_TOKENS = 48
WARM_TOKENS = 2  # the prefill, then one decode step of every sequence
BATCHED_BENCH = "llama-batched-bench"
BATCHED_BENCH_KVU = "llama-batched-bench -kvu"
R_SCRIPT = """
library(newrllama)
args <- commandArgs(trailingOnly = TRUE)
prompts <- readLines(args[[1]])
model <- model_load(args[[5]])
ctx <- context_create(model, n_ctx = as.integer(args[[2]]), n_threads = 2L, n_seq_max = length(prompts))
invisible(generate_parallel(ctx, prompts, max_tokens = as.integer(args[[4]]), progress = FALSE))
t0 <- Sys.time()
out <- generate_parallel(ctx, prompts, max_tokens = as.integer(args[[3]]), progress = FALSE)
cat(as.numeric(difftime(Sys.time(), t0, units = "secs")), attr(out, "stats")$n_gen_tokens, "\\n")
"""


def n_ctx_for(n: int) -> int:
    return max(n, 1) * 128  # 128 cells per sequence, in our contexts and llama-batched-bench alike


def parallel_context(model, n):
    return newrllama.Context(model, n_ctx=n_ctx_for(n), n_seq_max=n, n_threads=N_THREADS, prefix_cache=False)


def timed(call) -> Dict:
    t0 = time.perf_counter()
    figures = call()
    return {"seconds": time.perf_counter() - t0, **figures}


def python_engine(model, prompts) -> Run:
    """The Python scheduler, with its Python time per step in the timed call."""
    def run(_repeat: int) -> Dict:
        with parallel_context(model, len(prompts)) as ctx:
            ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=WARM_TOKENS))
            before = ctx.engine_stats()
            params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
            out = timed(lambda: {"done": ctx.generate_parallel(prompts, params)})
            after = ctx.engine_stats()
        done = out.pop("done")
        steps = max(1, after.n_steps - before.n_steps)
        return {**out, "tokens": sum(c.n_gen_tokens for c in done),
                "cached_tokens": sum(c.n_cached_tokens for c in done),
                "python_us_per_step": 1e6 * (after.t_python_s - before.t_python_s) / steps}
    return run


def c_driver_engine(model, prompts) -> Run:
    """The C driver (newrllama_generate_parallel_ex) over the same step primitives."""
    token_arrays = [ffi.new("int32_t[]", p) for p in prompts]

    def call(ctx, max_tokens: int) -> Dict:
        c_prompts = ffi.new("newrllama_prompt[]", len(token_arrays))
        for i, buf in enumerate(token_arrays):
            c_prompts[i].tokens, c_prompts[i].n_tokens = buf, len(buf)
        params = ffi.new("newrllama_sampling_params *", {"max_tokens": max_tokens, "top_k": 40, "top_p": 1.0,
                                                         "penalty_repeat": 1.0, "seed": 1234})
        stats = ffi.new("newrllama_parallel_stats *")
        results = ffi.new("newrllama_completion **")
        code = lib.newrllama_generate_parallel_ex(ctx.handle, c_prompts, len(prompts), params, 1, ffi.NULL, ffi.NULL,
                                                  results, stats, ffi.NULL)
        assert code == lib.NEWRLLAMA_OK, code
        lib.newrllama_free_completions(results[0], len(prompts))
        return {"tokens": stats.n_gen_tokens}

    def run(_repeat: int) -> Dict:
        with parallel_context(model, len(prompts)) as ctx:
            call(ctx, WARM_TOKENS)
            return timed(lambda: call(ctx, MAX_TOKENS))
    return run


def batched_bench_engine(binary: str, n: int, unified: bool, path: str) -> Run:
    args = ["-c", str(n_ctx_for(n)), "-b", "512", "-ub", "512", "-npp", str(PROMPT_TOKENS), "-npl", str(n)]
    args += ["-kvu"] if unified else []

    def run(_repeat: int) -> Dict:
        out = run_batched_bench_warm(binary, args, MAX_TOKENS - 1, N_THREADS, path)
        return {**out, "tokens": n * (int(out["row"]["TG"]) + 1)}
    return run


def generate_loop_engine(model, prompts) -> Run:
    def run(_repeat: int) -> Dict:
        params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
        with newrllama.Context(model, n_ctx=512, n_seq_max=1, n_threads=N_THREADS) as ctx:
            ctx.generate(prompts[0], newrllama.SamplingParams(max_tokens=WARM_TOKENS))
            return timed(lambda: {"tokens": sum(ctx.generate(p, params).n_gen_tokens for p in prompts)})
    return run


def llama_cpp_loop_engine(llm, prompts) -> Run:
    def completion(prompt, max_tokens: int) -> int:
        llm.reset()
        return llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0)["usage"]["completion_tokens"]

    def run(_repeat: int) -> Dict:
        completion(prompts[0], WARM_TOKENS)
        return timed(lambda: {"tokens": sum(completion(p, MAX_TOKENS) for p in prompts)})
    return run


def r_engine(texts: List[str], path: str) -> Run:
    """R's generate_parallel in a new R session, warmed up as ours; only its call is timed."""
    def run(_repeat: int) -> Dict:
        with tempfile.TemporaryDirectory() as tmp:
            prompt_file, script = Path(tmp) / "prompts.txt", Path(tmp) / "bench.R"
            prompt_file.write_text("\n".join(texts) + "\n")
            script.write_text(R_SCRIPT)
            env = dict(os.environ, NEWRLLAMA_PYTHON=sys.executable,
                       R_LIBS=os.environ.get("R_LIBS", str(ROOT / ".Rlib")))
            out = subprocess.run(["Rscript", str(script), str(prompt_file), str(n_ctx_for(len(texts))),
                                  str(MAX_TOKENS), str(WARM_TOKENS), path], capture_output=True, text=True, env=env,
                                 timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"R benchmark failed: {out.stderr[-2000:]}")
        seconds, tokens = out.stdout.split()[-2:]
        return {"seconds": float(seconds), "tokens": int(tokens)}
    return run


def rate(figures: Dict) -> float:
    return figures["tokens"] / figures["seconds"]


def bench_size(model, path, prompts, binary, llm, generate_loop: bool, with_r: bool, repeats: int) -> Dict:
    n = len(prompts)
    engines: Dict[str, Run] = {"generate_parallel": python_engine(model, prompts),
                               "C driver": c_driver_engine(model, prompts)}
    if binary:
        engines[BATCHED_BENCH] = batched_bench_engine(binary, n, unified=False, path=path)
        engines[BATCHED_BENCH_KVU] = batched_bench_engine(binary, n, unified=True, path=path)
    if generate_loop:
        engines["generate loop"] = generate_loop_engine(model, prompts)
    if llm is not None:
        engines["llama-cpp-python loop"] = llama_cpp_loop_engine(llm, prompts)
    if with_r and n == 16:
        texts = [model.detokenize(p) for p in prompts]
        engines["R generate_parallel"] = r_engine(texts, path)
        engines["generate_parallel on R's texts"] = python_engine(model, texts)
    raw = run_in_turn(engines, repeats, label=f"{n:3d} prompts, ")
    summary = {"prompts": n, "tokens_per_s": {e: statistics.median(rate(r["runs"][e]) for r in raw) for e in engines},
               "python_us_per_step": median_of(raw, "generate_parallel", "python_us_per_step"),
               "cached_tokens": max(r["runs"]["generate_parallel"]["cached_tokens"] for r in raw), "ratios": {}}
    pairs = [("generate_parallel", ref) for ref in engines if ref != "generate_parallel"]
    pairs += [("C driver", ref) for ref in (BATCHED_BENCH, BATCHED_BENCH_KVU) if ref in engines]
    pairs += [("R generate_parallel", "generate_parallel on R's texts")] if "R generate_parallel" in engines else []
    for engine, ref in pairs:
        summary["ratios"][f"{engine} / {ref}"] = paired_median(raw, lambda runs: rate(runs[engine]) / rate(runs[ref]))
    return {"summary": summary, "raw": raw}


def bench_threads(model, prompts, repeats) -> Dict:
    """16 threads each calling generate() once against one generate_parallel call, in turn on one warmed context."""
    params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
    texts: Dict[str, List[str]] = {}
    with parallel_context(model, len(prompts)) as ctx:
        ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=WARM_TOKENS))

        def one_call(_repeat: int) -> Dict:
            out = timed(lambda: {"done": ctx.generate_parallel(prompts, params)})
            texts["one call"] = [c.text for c in out.pop("done")]
            return out

        def threaded(_repeat: int) -> Dict:
            got: List[str] = [""] * len(prompts)
            def worker(i):
                got[i] = ctx.generate(prompts[i], params).text

            seconds = run_together(len(prompts), worker)
            texts["threads"] = got
            return {"seconds": seconds}

        raw = run_in_turn({"one generate_parallel call": one_call, "threads calling generate()": threaded}, repeats,
                          label="threads, ")
    return {"prompts": len(prompts), "one_call_s": median_of(raw, "one generate_parallel call"),
            "threads_s": median_of(raw, "threads calling generate()"),
            "threads_over_one_call": paired_median(
                raw, lambda r: r["threads calling generate()"]["seconds"] / r["one generate_parallel call"]["seconds"]),
            "same_text": sum(a == b for a, b in zip(texts["threads"], texts["one call"])), "raw": raw}


def bench_drift(model, prompts, calls: int):
    prompts = prompts[:8]
    times = []
    with newrllama.Context(model, n_ctx=n_ctx_for(8), n_seq_max=8, n_threads=N_THREADS) as ctx:
        for _ in range(calls):
            t0 = time.perf_counter()
            ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=16))
            times.append(time.perf_counter() - t0)
    # Medians: a slowdown shifts every call, while this shared machine adds spikes that would swing a mean.
    k = min(10, calls // 2)
    first, last = statistics.median(times[:k]), statistics.median(times[-k:])
    return {"calls": calls, "first_10_median_s": first, "last_10_median_s": last, "last_over_first": last / first,
            "times_s": times}


def sixteen_token_prompts(model):
    prompts = [model.tokenize(t)[:PROMPT_TOKENS] for t in TEXTS]
    assert all(len(p) == PROMPT_TOKENS for p in prompts)
    return prompts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=3, help="runs of every engine, in turn")
    parser.add_argument("--drift-calls", type=int, default=100, help="0: skip the drift measurement")
    parser.add_argument("--no-r", action="store_true")
    parser.add_argument("--no-llama-cpp", action="store_true")
    parser.add_argument("--no-generate-loop", action="store_true")
    parser.add_argument("--no-batched-bench", action="store_true")
    add_model_argument(parser)
    args = parser.parse_args()

    path = model_path(args.model)
    model = newrllama.Model(path)
    all_prompts = sixteen_token_prompts(model)
    binary = None if args.no_batched_bench else llama_tool_binary()
    llm = None
    if not args.no_llama_cpp:
        from llama_cpp import Llama
        llm = Llama(path, n_ctx=512, n_threads=N_THREADS, verbose=False)
    sizes = {}
    for n in args.sizes:
        prompts = (all_prompts * (n // len(all_prompts) + 1))[:n]
        sizes[n] = bench_size(model, path, prompts, binary, llm, not args.no_generate_loop, not args.no_r, args.repeats)
    threads = bench_threads(model, (all_prompts * 2)[:16], args.repeats)
    drift = bench_drift(model, [model.detokenize(p) for p in all_prompts], args.drift_calls) if args.drift_calls else None

    print(f"\nGenerated tokens/s, prefill included ({PROMPT_TOKENS}-token prompts, {MAX_TOKENS} new tokens each "
          f"(llama-batched-bench: -ntg {MAX_TOKENS - 1}), greedy, {N_THREADS} threads, {model_label(path)}; medians of "
          f"{args.repeats} repeats, ratios: medians of the ratios within a repeat)")
    for n, size in sizes.items():
        s = size["summary"]
        print(f"{n} prompts: " + ", ".join(f"{e} {r:.1f}" for e, r in s["tokens_per_s"].items())
              + f"; Python {s['python_us_per_step']:.0f} us/step; cached prompt tokens {s['cached_tokens']}")
        for name, ratio in s["ratios"].items():
            print(f"    {name:<64} {ratio:6.3f}")
    print(f"16 threads calling generate() once each: {threads['threads_s']:.2f} s; one generate_parallel call: "
          f"{threads['one_call_s']:.2f} s; ratio {threads['threads_over_one_call']:.2f} (target <= 1.3); "
          f"identical texts {threads['same_text']}/{threads['prompts']}")
    if drift:
        print(f"Drift over {drift['calls']} calls of 8 prompts: median of last 10 / median of first 10 = "
              f"{drift['last_over_first']:.3f}")
    write_results("parallel", {"model": model_label(path), "prompt_tokens": PROMPT_TOKENS, "max_tokens": MAX_TOKENS,
                               "batched_bench_ntg": MAX_TOKENS - 1, "n_threads": N_THREADS, "repeats": args.repeats,
                               "batched_bench": binary, "sizes": sizes, "threads": threads, "drift": drift})
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
