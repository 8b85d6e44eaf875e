"""Generation throughput of newrllama's scheduler, side by side with its C driver and llama.cpp's own tool.

Prints a table and writes JSON (default bench/results/bench_parallel.json). For 1, 4, 8,
16, 32 prompts of 16 tokens each, 48 new greedy tokens per prompt, 2 threads, the embedded
model, generated tokens per second with prefill included, for:
  - Context.generate_parallel: the Python scheduler driving the C step primitives,
    with the scheduler's own Python time per step (us);
  - the C driver (newrllama_generate_parallel_ex) over the same primitives;
  - llama.cpp's llama-batched-bench built from the llama.cpp that llama-cpp-python 0.3.36
    vendors (bench/build_llama_tools.sh, AMX off; -npp 16 -ntg 48 -t 2), and our ratio to it,
    both with its default KV layout (a stream per sequence) and with -kvu (one stream, as ours);
  - a loop of Context.generate and of llama-cpp-python's create_completion, and R at 16.
Then 16 threads each calling generate() with one prompt against one generate_parallel
call of the same 16 prompts, and the drift over 100 calls of 8 prompts. Figures are
ratios within one run: this machine is shared and noisy, so each rate is the best of --repeats, the
engines run in turn within each repeat, and the ratio to llama-batched-bench is also given as the median
of the ratios within each repeat.

    .venv/bin/python bench/bench_parallel.py [--sizes 1 4 8 16 32] [--repeats 3] [--drift-calls 100]
        [--no-r] [--no-llama-cpp] [--no-batched-bench]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import newrllama
from llama_tools import llama_tool_binary, run_batched_bench
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
R_SCRIPT = """
library(newrllama)
args <- commandArgs(trailingOnly = TRUE)
prompts <- readLines(args[[1]])
model <- model_load()
ctx <- context_create(model, n_ctx = as.integer(args[[2]]), n_threads = 2L, n_seq_max = length(prompts))
invisible(generate_parallel(ctx, prompts[1], max_tokens = 4L, progress = FALSE))
best <- 0
for (i in seq_len(as.integer(args[[4]]))) {
  t0 <- Sys.time()
  out <- generate_parallel(ctx, prompts, max_tokens = as.integer(args[[3]]), progress = FALSE)
  elapsed <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
  best <- max(best, attr(out, "stats")$n_gen_tokens / elapsed)
}
cat(best, "\\n")
"""


def n_ctx_for(n: int) -> int:
    return max(n, 1) * 128


def best_rate(repeats: int, run) -> float:
    """Best tokens/s over `repeats` timed calls of run(), which returns the tokens it generated."""
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        tokens = run()
        best = max(best, tokens / (time.perf_counter() - t0))
    return best


def parallel_context(model, n):
    return newrllama.Context(model, n_ctx=n_ctx_for(n), n_seq_max=n, n_threads=N_THREADS)


def bench_parallel(model, prompts, repeats):
    """Tokens/s of the Python scheduler, and its Python time per step in those runs."""
    params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
    with parallel_context(model, len(prompts)) as ctx:
        # Warm-up at full width, as the C driver's and llama-batched-bench's: the first pass of a shape
        # touches the pages of its buffers.
        ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=2))
        before = ctx.engine_stats()
        rate = best_rate(repeats, lambda: sum(c.n_gen_tokens for c in ctx.generate_parallel(prompts, params)))
        after = ctx.engine_stats()
    python_us = 1e6 * (after.t_python_s - before.t_python_s) / max(1, after.n_steps - before.n_steps)
    return rate, python_us


def bench_c_driver(model, prompts, repeats):
    """Tokens/s of the C driver (newrllama_generate_parallel_ex) over the same step primitives."""
    c_prompts = ffi.new("newrllama_prompt[]", len(prompts))
    keep = [ffi.new("int32_t[]", p) for p in prompts]
    for i, buf in enumerate(keep):
        c_prompts[i].tokens, c_prompts[i].n_tokens = buf, len(prompts[i])
    params = ffi.new("newrllama_sampling_params *", {"max_tokens": MAX_TOKENS, "top_k": 40, "top_p": 1.0,
                                                     "penalty_repeat": 1.0, "seed": 1234})
    stats = ffi.new("newrllama_parallel_stats *")
    results = ffi.new("newrllama_completion **")

    def run():
        code = lib.newrllama_generate_parallel_ex(ctx.handle, c_prompts, len(prompts), params, 1, ffi.NULL, ffi.NULL,
                                                  results, stats, ffi.NULL)
        assert code == lib.NEWRLLAMA_OK, code
        lib.newrllama_free_completions(results[0], len(prompts))
        return stats.n_gen_tokens

    with parallel_context(model, len(prompts)) as ctx:
        run()
        return best_rate(repeats, run)


def bench_batched_bench(sizes, repeats, unified: bool = False):
    """llama-batched-bench: generated tokens/s with prefill included (B * TG / T), best of repeats per size;
    unified: one KV stream for all sequences (-kvu), the layout our contexts use."""
    binary = llama_tool_binary()
    best = {n: 0.0 for n in sizes}
    n_ctx = max(sizes) * 128  # 128 cells per sequence, as our contexts
    flags = ["-kvu"] if unified else []
    for _ in range(repeats):
        for row in run_batched_bench(binary, ["-c", str(n_ctx), "-b", "512", "-ub", "512", "-npp", str(PROMPT_TOKENS),
                                              "-ntg", str(MAX_TOKENS), "-npl", ",".join(map(str, sizes))] + flags,
                                     N_THREADS):
            b = int(row["B"])
            if b in best:
                best[b] = max(best[b], b * row["TG"] / row["T"])
    return best


def paired_ratio(ours, reference):
    """The median over repeats of our rate over the reference's rate measured in the same repeat."""
    return statistics.median(a / b for a, b in zip(ours, reference))


def bench_threads(model, prompts, repeats):
    """Best time of 16 threads each calling generate() once, over the best time of one generate_parallel call."""
    params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
    with parallel_context(model, len(prompts)) as ctx:
        ctx.generate_parallel(prompts[:1], newrllama.SamplingParams(max_tokens=4))
        one_call, threaded = float("inf"), float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            together = [c.text for c in ctx.generate_parallel(prompts, params)]
            one_call = min(one_call, time.perf_counter() - t0)
            texts = [None] * len(prompts)
            barrier = threading.Barrier(len(prompts) + 1)

            def worker(i):
                barrier.wait()
                texts[i] = ctx.generate(prompts[i], params).text

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
            for t in threads:
                t.start()
            barrier.wait()
            t0 = time.perf_counter()
            for t in threads:
                t.join()
            threaded = min(threaded, time.perf_counter() - t0)
    same = sum(a == b for a, b in zip(texts, together))
    return {"one_call_s": one_call, "threads_s": threaded, "threads_over_one_call": threaded / one_call,
            "same_text": same, "prompts": len(prompts)}


def bench_generate_loop(model, prompts, repeats):
    params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
    with newrllama.Context(model, n_ctx=512, n_seq_max=1, n_threads=N_THREADS) as ctx:
        ctx.generate(prompts[0], newrllama.SamplingParams(max_tokens=4))
        return best_rate(repeats, lambda: sum(ctx.generate(p, params).n_gen_tokens for p in prompts))


def bench_llama_cpp_loop(llm, prompts, repeats):
    def run():
        tokens = 0
        for p in prompts:
            llm.reset()
            tokens += llm.create_completion(p, max_tokens=MAX_TOKENS, temperature=0.0)["usage"]["completion_tokens"]
        return tokens

    llm.create_completion(prompts[0], max_tokens=4, temperature=0.0)
    return best_rate(repeats, run)


def bench_r(prompts, repeats):
    prompt_file = ROOT / "bench" / "results" / "r_prompts.txt"
    prompt_file.write_text("\n".join(prompts) + "\n")
    script = ROOT / "bench" / "results" / "bench_r.R"
    script.write_text(R_SCRIPT)
    env = dict(os.environ, NEWRLLAMA_PYTHON=sys.executable, R_LIBS=str(ROOT / ".Rlib"))
    out = subprocess.run(["Rscript", str(script), str(prompt_file), str(n_ctx_for(len(prompts))), str(MAX_TOKENS), str(repeats)],
                         capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"R benchmark failed: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


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
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is kept")
    parser.add_argument("--drift-calls", type=int, default=100)
    parser.add_argument("--no-r", action="store_true")
    parser.add_argument("--no-llama-cpp", action="store_true")
    parser.add_argument("--no-batched-bench", action="store_true")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "bench_parallel.json"))
    args = parser.parse_args()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results").mkdir(exist_ok=True)

    model = newrllama.Model()
    all_prompts = sixteen_token_prompts(model)
    llm = None
    if not args.no_llama_cpp:
        from llama_cpp import Llama
        llm = Llama(newrllama.default_model_path(), n_ctx=512, n_threads=N_THREADS, verbose=False)
    rows = []
    for n in args.sizes:
        prompts = (all_prompts * (n // len(all_prompts) + 1))[:n]
        # Interleaved, best of repeats each: on a shared machine the load drifts within minutes.
        rates = {"python": [], "c": [], "bb": [], "bb_kvu": []}
        python_us = []
        for _ in range(args.repeats):
            if not args.no_batched_bench:
                rates["bb"].append(bench_batched_bench([n], 1)[n])
                rates["bb_kvu"].append(bench_batched_bench([n], 1, unified=True)[n])
            r, us = bench_parallel(model, prompts, 1)
            rates["python"].append(r)
            python_us.append(us)
            rates["c"].append(bench_c_driver(model, prompts, 1))
        row = {"prompts": n, "generate_parallel": max(rates["python"]),
               "python_us_per_step": statistics.median(python_us), "c_driver": max(rates["c"]),
               "generate_loop": bench_generate_loop(model, prompts, args.repeats), "rates": rates}
        if rates["bb"]:
            # Best over best, and the median of the ratios within each repeat: the load of this shared
            # machine drifts over minutes, and a repeat's engines ran within the same minute.
            for key, ref in (("", "bb"), ("_kvu", "bb_kvu")):
                row["batched_bench" + key] = max(rates[ref])
                row["over_batched_bench" + key] = row["generate_parallel"] / row["batched_bench" + key]
                row["paired_over_batched_bench" + key] = paired_ratio(rates["python"], rates[ref])
            row["c_paired_over_batched_bench"] = paired_ratio(rates["c"], rates["bb"])
        if llm is not None:
            row["llama_cpp_loop"] = bench_llama_cpp_loop(llm, prompts, args.repeats)
        if not args.no_r and n == 16:
            texts = [model.detokenize(p) for p in prompts]
            row["r_generate_parallel"] = bench_r(texts, args.repeats)
            row["r_over_python"] = row["r_generate_parallel"] / bench_parallel(model, texts, args.repeats)[0]
        row["speedup_vs_generate_loop"] = row["generate_parallel"] / row["generate_loop"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    threads = bench_threads(model, (all_prompts * 2)[:16], args.repeats)
    drift = bench_drift(model, [model.detokenize(p) for p in all_prompts], args.drift_calls) if args.drift_calls else None

    def col(r, key, width, fmt="{:.1f}"):
        return f"{fmt.format(r[key]):>{width}}" if key in r else f"{'-':>{width}}"

    print(f"\nGenerated tokens/s, prefill included ({PROMPT_TOKENS}-token prompts, {MAX_TOKENS} new tokens each, "
          f"greedy, {N_THREADS} threads, embedded model; best of {args.repeats})")
    print(f"{'prompts':>7} {'python':>8} {'C driver':>9} {'batched-bench':>14} {'python/bb':>10} {'bb -kvu':>8} "
          f"{'python/bb-kvu':>14} {'py us/step':>11} "
          f"{'gen loop':>9} {'llama-cpp':>10} {'R':>7} {'speedup':>8}")
    for r in rows:
        print(f"{r['prompts']:>7} {r['generate_parallel']:8.1f} {r['c_driver']:9.1f} {col(r, 'batched_bench', 14)} "
              f"{col(r, 'over_batched_bench', 10, '{:.3f}')} {col(r, 'batched_bench_kvu', 8)} "
              f"{col(r, 'over_batched_bench_kvu', 14, '{:.3f}')} {r['python_us_per_step']:11.0f} {r['generate_loop']:9.1f} "
              f"{col(r, 'llama_cpp_loop', 10)} {col(r, 'r_generate_parallel', 7)} {r['speedup_vs_generate_loop']:7.2f}x")
    if any("paired_over_batched_bench" in r for r in rows):
        print(f"\nMedian over the {args.repeats} repeats of the ratio within a repeat (same minute, same load):")
        print(f"{'prompts':>7} {'python/bb':>10} {'python/bb-kvu':>14} {'C driver/bb':>12}")
        for r in rows:
            print(f"{r['prompts']:>7} {r['paired_over_batched_bench']:10.3f} {r['paired_over_batched_bench_kvu']:14.3f} "
                  f"{r['c_paired_over_batched_bench']:12.3f}")
    for r in rows:
        if "r_over_python" in r:
            print(f"R generate_parallel / Python generate_parallel at {r['prompts']} prompts: {r['r_over_python']:.3f}")
    print(f"16 threads calling generate() once each: {threads['threads_s']:.2f} s; one generate_parallel call: "
          f"{threads['one_call_s']:.2f} s; ratio {threads['threads_over_one_call']:.2f} (target <= 1.3); "
          f"identical texts {threads['same_text']}/{threads['prompts']}")
    if drift:
        print(f"Drift over {drift['calls']} calls of 8 prompts: median of last 10 / median of first 10 = "
              f"{drift['last_over_first']:.3f}")
    Path(args.json).write_text(json.dumps({"rows": rows, "threads": threads, "drift": drift, "max_tokens": MAX_TOKENS,
                                           "n_threads": N_THREADS, "repeats": args.repeats}, indent=2))
    print(f"wrote {args.json}")
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
