"""The annotation workload with AMX tiles and without, on a K-quant model: nearly all of its time is prefill.

The workload of bench/bench_annotate.py (an instruction of 450 tokens shared by every prompt, then a document of
25 tokens; 16 sequences, 2 threads, the prefix cache on), each prompt scored against 4 labels (`choices`), run with
newrllama's AMX kernel (quant-gemm-amx takes the K-quant matmuls of 8 rows and more) and with NEWRLLAMA_AMX=off
(quant-gemm-avx2 takes every one, with vpdpbusd from 2 rows up). The setting is read once per process, so each run
is a fresh process, the two in turn, the first rotating between repeats; each process warms up at full width under
another instruction before its timed call. Every process's label log-probabilities are kept: the two kernels must
give the same bits.

    .venv/bin/python bench/bench_amx.py [--docs 256] [--repeats 3] [--model qwen2.5-coder-1.5b]
Writes bench/results/amx-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict

import newrllama
from bench_annotate import N_SEQ, N_THREADS, TOPICS, annotation_prompts, warm_up_prompts
from bench_models import add_model_argument, model_label, model_path
from bench_results import write_results
from in_turn import median_of, run_in_turn, speed_ratio

LABELS = TOPICS[:4]
# Every CPU with AMX-INT8 also has AVX512-VNNI, which quant-gemm-avx2 uses for steps of several rows.
WITH, WITHOUT = "AMX tiles (quant-gemm-amx)", "NEWRLLAMA_AMX=off (quant-gemm-avx2 with VNNI)"
SETTING = {WITH: "on", WITHOUT: "off"}


def worker(path: str, n_docs: int) -> Dict:
    """One timed annotation call in this process: its seconds and every prompt's label log-probabilities."""
    model = newrllama.Model(path)
    params = newrllama.SamplingParams(choices=LABELS)
    prompts, warm = annotation_prompts(model, n_docs), warm_up_prompts(model)
    with newrllama.Context(model, n_ctx=N_SEQ * 512, n_seq_max=N_SEQ, n_threads=N_THREADS, prefix_cache=True) as ctx:
        ctx.generate_parallel(warm, params)
        t0 = time.perf_counter()
        done = ctx.generate_parallel(prompts, params)
        seconds = time.perf_counter() - t0
        build = ctx.engine_stats().determinism.build
    model.close()
    failed = [c.error for c in done if c.finish_reason == "error"]
    if failed:
        raise SystemExit(f"{len(failed)} prompts failed, for example: {failed[0]}")
    decoded = sum(c.n_prompt_tokens - c.n_cached_tokens for c in done)
    return {"seconds": seconds, "prompt_tokens_decoded": decoded, "prompt_tokens_per_s": decoded / seconds,
            "log_probs": [[c.choice_logprobs[label].hex() for label in LABELS] for c in done], "build": build}


def in_fresh_process(path: str, n_docs: int, amx: str) -> Dict:
    done = subprocess.run([sys.executable, __file__, "--worker", path, "--docs", str(n_docs)],
                          env={**os.environ, "NEWRLLAMA_AMX": amx}, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    add_model_argument(ap)
    ap.set_defaults(model="qwen2.5-coder-1.5b")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.docs)))
        return 0
    path = model_path(args.model)
    log_probs = {}

    def engine(name: str):
        def run(repeat: int) -> Dict:
            out = in_fresh_process(path, args.docs, SETTING[name])
            log_probs[f"{name} {repeat}"] = out.pop("log_probs")
            return out
        return run

    raw = run_in_turn({WITH: engine(WITH), WITHOUT: engine(WITHOUT)}, args.repeats)
    same_bits = len({json.dumps(v) for v in log_probs.values()}) == 1
    results = {
        "model": model_label(path), "docs": args.docs, "n_seq": N_SEQ, "threads": N_THREADS, "labels": LABELS,
        "repeats": args.repeats, "seconds": {name: median_of(raw, name, "seconds") for name in (WITH, WITHOUT)},
        "prompt_tokens_per_s": {name: median_of(raw, name, "prompt_tokens_per_s") for name in (WITH, WITHOUT)},
        "speed_with_tiles": speed_ratio(raw, WITH, WITHOUT),
        "same_bits": same_bits, "raw": raw,
    }
    print(f"AMX tiles: {results['speed_with_tiles']:.2f}x the speed; label log-probabilities the same bits in "
          f"every process: {same_bits}")
    write_results("amx", results)
    return 0 if same_bits else 1


if __name__ == "__main__":
    sys.exit(main())
