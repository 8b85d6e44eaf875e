"""Contexts must not slow each other down: a 16-prompt call on one context, alone and beside a second one.

In one process, on the embedded model, 2 threads: tokens per second of one
generate_parallel call (16 short prompts, 64 greedy tokens) on context A, (1) with A
alone, (2) with a second context B alive but never used, (3) with B used once (one
decode) and idle since. The cases run in turn, their order rotating, `--repeats` times
(B made anew for each run); the ratios are medians of the ratios within a repeat.

    .venv/bin/python bench/bench_two_contexts.py [--repeats 6]
Writes bench/results/two-contexts-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from short_prompts import short_prompts  # noqa: E402

N_SEQ = 16
N_THREADS = 2
PARAMS = newrllama.SamplingParams(max_tokens=64)


def tokens_per_s(ctx: newrllama.Context) -> float:
    t0 = time.perf_counter()
    done = ctx.generate_parallel(short_prompts(N_SEQ), PARAMS)
    return sum(c.n_gen_tokens for c in done) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    cases = ["alone", "second context alive, never used", "second context used once, then idle"]
    rates = {c: [] for c in cases}
    with newrllama.Model() as model:
        def context() -> newrllama.Context:
            return newrllama.Context(model, n_ctx=N_SEQ * 512, n_seq_max=N_SEQ, n_threads=N_THREADS)
        with context() as a:
            tokens_per_s(a)  # warm-up at full width
            def alone() -> float:
                return tokens_per_s(a)

            def beside_unused() -> float:
                with context():
                    return tokens_per_s(a)

            def beside_used_once() -> float:
                with context() as b:
                    b.generate("Hello", newrllama.SamplingParams(max_tokens=1))
                    return tokens_per_s(a)
            runs = [alone, beside_unused, beside_used_once]
            for repeat in range(args.repeats):
                for k in range(len(runs)):  # the order rotates between repeats
                    case = (k + repeat) % len(runs)
                    rates[cases[case]].append(runs[case]())
    report = {"repeats": args.repeats, "n_seq": N_SEQ, "threads": N_THREADS, "max_tokens": PARAMS.max_tokens,
              "tokens_per_s": rates, "cases": {}}
    print(f"16 prompts x {PARAMS.max_tokens} greedy tokens on context A, {N_THREADS} threads, embedded model")
    for c in cases:
        ratio = statistics.median(x / y for x, y in zip(rates[c], rates[cases[0]]))
        report["cases"][c] = {"median_tokens_per_s": statistics.median(rates[c]), "over_alone": ratio}
        print(f"{c:>38}: {statistics.median(rates[c]):7.1f} tokens/s, {ratio:.2f}x alone")
    write_results("two-contexts", report)


if __name__ == "__main__":
    main()
