"""Prefill of long prompts with nothing shared: ours against llama.cpp's llama-batched-bench.

16 distinct prompts of --lengths tokens each (random word salad, a different start for
each, so nothing is shared), one greedy token each, 16 sequences, 2 threads, the embedded
model. Ours: one Context.generate_parallel call with the prefix cache on (the default) and
off, each on a new context of 16 x (length + 256) cells. The references, same shape and
work (-npp length -ntg 1 -npl 16, -b/-ub 512): llama-batched-bench with one KV stream per
sequence, as llama-server runs its slots and as ours, and with the unified cache (-kvu).
Each repeat runs the four in turn, the first rotating between repeats, after a warm-up
of each; every run's context first decodes one 16-token prompt, as llama-batched-bench
does in its own before it times. Ratios are medians of the ratios within a repeat.

    .venv/bin/python bench/bench_long_prompts.py [--lengths 500 1000 2000] [--repeats 2]
Writes bench/results/long-prompts-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Callable, Dict, List

import newrllama
from bench_annotate import OBJECTS, SUBJECTS, VERBS
from bench_results import write_results
from llama_tools import llama_tool_binary, run_batched_bench

N_SEQ = 16
N_THREADS = 2


def distinct_prompts(model: newrllama.Model, length: int, seed: int) -> List[List[int]]:
    rng = random.Random(seed)
    words = SUBJECTS + VERBS + OBJECTS
    out = []
    for k in range(N_SEQ):
        text = f"Document {seed}-{k}. " + " ".join(rng.choice(words) for _ in range(length))
        out.append(model.tokenize(text)[:length])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    binary = llama_tool_binary("llama-batched-bench")
    one = newrllama.SamplingParams(max_tokens=1)
    raw: Dict[int, List[Dict[str, float]]] = {n: [] for n in args.lengths}
    with newrllama.Model() as model:
        for n in args.lengths:
            n_ctx = N_SEQ * (n + 256)

            def ours(cache: bool, seed: int) -> float:
                prompts = distinct_prompts(model, n, seed)
                with newrllama.Context(model, n_ctx=n_ctx, n_seq_max=N_SEQ, n_threads=N_THREADS,
                                       prefix_cache=cache) as ctx:
                    # llama-batched-bench decodes one 16-token sequence in its context before it times
                    ctx.generate_parallel([distinct_prompts(model, 16, -seed)[0]], one)
                    t0 = time.perf_counter()
                    ctx.generate_parallel(prompts, one)
                    return time.perf_counter() - t0

            def bb(unified: bool) -> float:
                row = run_batched_bench(binary, ["-c", str(n_ctx), "-b", "512", "-ub", "512", "-npp", str(n), "-ntg", "1",
                                                 "-npl", str(N_SEQ)] + (["-kvu"] if unified else []), N_THREADS)[0]
                return row["T"]
            runs: Dict[str, Callable[[int], float]] = {
                "newrllama, prefix cache on": lambda seed: ours(True, seed),
                "newrllama, prefix cache off": lambda seed: ours(False, seed),
                "llama-batched-bench, a stream per sequence": lambda seed: bb(False),
                "llama-batched-bench -kvu": lambda seed: bb(True)}
            names = list(runs)
            for name in names:  # warm-up
                runs[name](0)
            for repeat in range(args.repeats):
                row = {}
                for k in range(len(names)):
                    name = names[(k + repeat) % len(names)]
                    row[name] = runs[name](repeat + 1)
                    print(f"{n:5d} tokens, repeat {repeat + 1}: {name:<44} {row[name]:7.2f} s", flush=True)
                raw[n].append(row)
    summary = {}
    reference = "llama-batched-bench, a stream per sequence"
    print(f"\n{N_SEQ} distinct prompts, prefill and one token, {N_THREADS} threads; prompt tokens/s (median) and "
          f"speed ratio to {reference} (median of ratios within a repeat)")
    for n, rows in raw.items():
        summary[n] = {}
        for name in rows[0]:
            rate = statistics.median(N_SEQ * n / r[name] for r in rows)
            ratio = statistics.median(r[reference] / r[name] for r in rows)
            summary[n][name] = {"prompt_tokens_per_s": rate, "over_streams": ratio}
            print(f"{n:5d} {name:<44} {rate:8.1f} tok/s {ratio:6.2f}")
    write_results("long-prompts", {"n_seq": N_SEQ, "threads": N_THREADS, "repeats": args.repeats,
                                   "batched_bench": binary, "summary": summary, "raw": raw})


if __name__ == "__main__":
    main()
