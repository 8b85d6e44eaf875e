"""What each rule of batch invariance costs in generation, side by side with llama-batched-bench.

The workload of bench_parallel.py (N prompts of 16 tokens, 48 greedy tokens each, 2 threads, the embedded
model, prefill included), run in a fresh process per variant, since ggml reads its matmul setting once per
process:
  - "default": batch_invariant=True, the tiled matmul forced for every row count (the shim's
    GGML_CPU_TILED_MM_FORCE=1), a KV stream per sequence, bf16 K and V, weights not repacked;
  - "tiles not forced": the same with GGML_CPU_TILED_MM_FORCE=0 (not batch-invariant: for measuring only);
  - "batch_invariant=False, tiles not forced": f16 K and V as well;
  - llama-batched-bench (default KV layout, a stream per sequence; repacked weights, as llama.cpp loads them).
Each repeat runs them in turn, the first rotating; ratios are paired medians within repeats.

    .venv/bin/python bench/bench_invariance_cost.py [--sizes 16 32] [--repeats 3]
Writes bench/results/invariance-cost-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict

from bench_parallel import (MAX_TOKENS, N_THREADS, PROMPT_TOKENS, TEXTS, WARM_TOKENS, batched_bench_engine, n_ctx_for,
                            rate)
from bench_results import write_results
from in_turn import Run, run_in_turn, speed_ratio
from llama_tools import llama_tool_binary

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
import newrllama
n, invariant = int(sys.argv[1]), sys.argv[2] == "1"
texts = json.loads(sys.argv[3])
with newrllama.Model(None) as model:
    prompts = [model.tokenize(t)[:{tokens}] for t in texts[:n]]
    with newrllama.Context(model, n_ctx={cells} * n, n_seq_max=n, n_threads={threads}, batch_invariant=invariant) as ctx:
        ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens={warm}))
        t0 = time.perf_counter()
        done = ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens={max_tokens}))
        seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "tokens": sum(c.n_gen_tokens for c in done)}}))
"""
VARIANTS = {  # name: (batch_invariant, GGML_CPU_TILED_MM_FORCE)
    "default": (True, None),
    "tiles not forced": (True, "0"),
    "batch_invariant=False, tiles not forced": (False, "0"),
}


def child_engine(n: int, invariant: bool, tiles: str | None) -> Run:
    code = CHILD.format(tokens=PROMPT_TOKENS, cells=n_ctx_for(1), threads=N_THREADS, warm=WARM_TOKENS,
                        max_tokens=MAX_TOKENS)
    env = dict(os.environ)
    env.pop("GGML_CPU_TILED_MM_FORCE", None)
    if tiles is not None:
        env["GGML_CPU_TILED_MM_FORCE"] = tiles

    def run(_repeat: int) -> Dict:
        out = subprocess.run([sys.executable, "-c", code, str(n), "1" if invariant else "0", json.dumps(TEXTS)],
                             capture_output=True, text=True, env=env, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    binary = llama_tool_binary()
    sizes = {}
    for n in args.sizes:
        runs = {name: child_engine(n, invariant, tiles) for name, (invariant, tiles) in VARIANTS.items()}
        runs["llama-batched-bench"] = batched_bench_engine(binary, n, unified=False)
        raw = run_in_turn(runs, args.repeats, f"{n} prompts, ")
        tokens_per_s = {name: statistics.median(rate(r["runs"][name]) for r in raw) for name in runs}
        sizes[str(n)] = {"tokens_per_s": tokens_per_s,
                         "speed_vs_default": {name: speed_ratio(raw, name, "default") for name in runs},
                         "speed_vs_llama_batched_bench": {name: speed_ratio(raw, name, "llama-batched-bench")
                                                          for name in runs},
                         "raw": raw}
    path = write_results("invariance-cost", {"prompt_tokens": PROMPT_TOKENS, "max_tokens": MAX_TOKENS,
                                             "n_threads": N_THREADS, "repeats": args.repeats, "sizes": sizes})
    for n, s in sizes.items():
        for name in s["tokens_per_s"]:
            print(f"{n:>3} prompts  {name:<42} {s['tokens_per_s'][name]:7.1f} tok/s  "
                  f"x{s['speed_vs_default'][name]:.2f} default  x{s['speed_vs_llama_batched_bench'][name]:.2f} "
                  "llama-batched-bench")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
