"""Where the one unified KV stream (prefix cache on) costs against a stream per sequence (prefix_cache=False)
when prompts share nothing: the same 64 distinct ~450-token prompts of bench_vs_llama_server.py ("nothing
shared"), 16 sequences, 2 threads, one generate_parallel call, with 1 and with 4 greedy tokens per prompt.

With 1 token a prompt's answer comes from its prefill's last row, so every step is prefill; with 4, the
sequences past their prefill also generate. llama.cpp's CPU flash attention, in a step of 64 tokens or
more, takes 64 of them at a time and computes every block of 64 cells that any of them sees: a group with
tokens of several sequences would see all their cells in the unified stream, where a split cache attends
each over its own stream; over the unified stream the scheduler therefore gives such a step either the
generated tokens or the prefill (scheduler.py, _step_sides). The four runs go in turn
(bench/in_turn.py), each on a new context after a warm-up.

    .venv/bin/python bench/bench_unified_kv.py [--repeats 2] [--docs 64]
Writes bench/results/unified-kv-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_vs_llama_server import N_CTX, N_SEQ, N_THREADS, documents, unshared_prompts  # noqa: E402
from in_turn import median_of, paired_median, run_in_turn  # noqa: E402

TOKENS = (1, 4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--docs", type=int, default=64)
    args = ap.parse_args()
    prompts = unshared_prompts(7, documents(args.docs, 1007))
    warm_up = unshared_prompts(8, documents(N_SEQ, 1008))  # others: nothing of the timed prompts is cached
    with newrllama.Model() as model:
        def timed(prefix_cache: bool, tokens: int):
            params = newrllama.SamplingParams(max_tokens=tokens)

            def run(_repeat: int) -> dict:
                with newrllama.Context(model, n_ctx=N_CTX, n_seq_max=N_SEQ, n_threads=N_THREADS,
                                       prefix_cache=prefix_cache) as ctx:
                    ctx.generate_parallel(warm_up, newrllama.SamplingParams(max_tokens=2))  # at full width
                    t0 = time.perf_counter()
                    ctx.generate_parallel(prompts, params)
                    stats = ctx.last_stats
                    return {"seconds": time.perf_counter() - t0, "steps": stats.n_decode_calls,
                            "cached_tokens": stats.n_cached_tokens}
            return run

        runs = {f"{layout}, max_tokens={tokens}": timed(layout == "unified", tokens)
                for tokens in TOKENS for layout in ("unified", "split")}
        raw = run_in_turn(runs, args.repeats)
    ratios = {f"max_tokens={t}": paired_median(raw, lambda r, t=t: r[f"unified, max_tokens={t}"]["seconds"]
                                               / r[f"split, max_tokens={t}"]["seconds"]) for t in TOKENS}
    report = {"model": Path(model.path).name, "docs": len(prompts), "n_seq": N_SEQ, "threads": N_THREADS,
              "repeats": args.repeats, "raw": raw, "median_s": {name: median_of(raw, name) for name in runs},
              "unified_over_split": ratios}
    for name in runs:
        print(f"{name:>24}: {report['median_s'][name]:.1f} s")
    for name, ratio in ratios.items():
        print(f"unified / split, {name}: {ratio:.3f}")
    write_results("unified-kv", report)


if __name__ == "__main__":
    main()
