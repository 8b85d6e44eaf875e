"""Generation throughput of newrllama's parallel engine against one-by-one decoding.

Prints a table and writes JSON (default bench/results/bench_parallel.json):
generated tokens/s for 1, 4, 8, 16, 32 prompts (48 new tokens each, greedy,
2 threads, embedded model) for Context.generate_parallel, a loop of
Context.generate, a loop of llama-cpp-python's Llama.create_completion, and
generate_parallel called from R; then the drift over 100 consecutive calls of
8 prompts. Figures are ratios within one run: this machine is shared and noisy,
so every figure is the best of --repeats runs (the least disturbed one).

    .venv/bin/python bench/bench_parallel.py [--sizes 1 4 8 16 32] [--repeats 3] [--drift-calls 100] [--no-r] [--no-llama-cpp]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import newrllama

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["the ocean", "mountains", "a library", "winter", "coffee", "trains", "the moon", "gardens",
          "music", "rivers", "bread", "cities", "forests", "bicycles", "the desert", "painting",
          "a lighthouse", "rain", "chess", "honey", "volcanoes", "bridges", "owls", "the market",
          "islands", "clocks", "tea", "snow", "castles", "whales", "autumn", "a small village"]
PROMPTS = [f"Here is a short story about {t}:" for t in TOPICS]
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


def bench_parallel(model, prompts, repeats):
    params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
    with newrllama.Context(model, n_ctx=n_ctx_for(len(prompts)), n_seq_max=len(prompts), n_threads=N_THREADS) as ctx:
        ctx.generate_parallel(prompts[:1], newrllama.SamplingParams(max_tokens=4))  # warm-up
        return best_rate(repeats, lambda: sum(c.n_gen_tokens for c in ctx.generate_parallel(prompts, params)))


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


def bench_drift(model, calls: int):
    prompts = PROMPTS[:8]
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is kept")
    parser.add_argument("--drift-calls", type=int, default=100)
    parser.add_argument("--no-r", action="store_true")
    parser.add_argument("--no-llama-cpp", action="store_true")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "bench_parallel.json"))
    args = parser.parse_args()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results").mkdir(exist_ok=True)

    model = newrllama.Model()
    llm = None
    if not args.no_llama_cpp:
        from llama_cpp import Llama
        llm = Llama(newrllama.default_model_path(), n_ctx=512, n_threads=N_THREADS, verbose=False)
    rows = []
    for n in args.sizes:
        prompts = (PROMPTS * (n // len(PROMPTS) + 1))[:n]
        row = {"prompts": n, "generate_parallel": bench_parallel(model, prompts, args.repeats),
               "generate_loop": bench_generate_loop(model, prompts, args.repeats)}
        if llm is not None:
            row["llama_cpp_loop"] = bench_llama_cpp_loop(llm, prompts, args.repeats)
        if not args.no_r and n == 16:
            row["r_generate_parallel"] = bench_r(prompts, args.repeats)
            row["r_over_python"] = row["r_generate_parallel"] / row["generate_parallel"]
        row["speedup_vs_generate_loop"] = row["generate_parallel"] / row["generate_loop"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    drift = bench_drift(model, args.drift_calls) if args.drift_calls else None

    print(f"\nGenerated tokens/s ({MAX_TOKENS} new tokens per prompt, greedy, {N_THREADS} threads, embedded model)")
    header = f"{'prompts':>7} {'parallel':>9} {'gen loop':>9} {'llama-cpp':>10} {'R parallel':>11} {'speedup':>8}"
    print(header)
    for r in rows:
        llama = f"{r['llama_cpp_loop']:10.1f}" if "llama_cpp_loop" in r else f"{'-':>10}"
        rrow = f"{r['r_generate_parallel']:11.1f}" if "r_generate_parallel" in r else f"{'-':>11}"
        print(f"{r['prompts']:>7} {r['generate_parallel']:9.1f} {r['generate_loop']:9.1f} {llama} {rrow} "
              f"{r['speedup_vs_generate_loop']:7.2f}x")
    for r in rows:
        if "r_over_python" in r:
            print(f"R generate_parallel / Python generate_parallel at {r['prompts']} prompts: {r['r_over_python']:.3f}")
    if drift:
        print(f"Drift over {drift['calls']} calls of 8 prompts: median of last 10 / median of first 10 = "
              f"{drift['last_over_first']:.3f}")
    Path(args.json).write_text(json.dumps({"rows": rows, "drift": drift, "max_tokens": MAX_TOKENS,
                                           "threads": N_THREADS, "repeats": args.repeats}, indent=2))
    print(f"wrote {args.json}")
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
