"""How far prefill and one-prompt decode are from what the machine allows, for newrllama and llama.cpp's tool.

The machine's limits (bench/machine_limits.py, 2 threads at once): the rate at which it reads a 1 GiB buffer,
and its int8 multiply-add peak on the vector unit (AVX512-VNNI, AVX-VNNI or AVX2) and on AMX tiles where it has
them. The work, on one model (the embedded one by default, or --model): one prompt of 512 tokens of Reuters
stories, then 128 greedy decode steps after it (fewer where the model ends its answer), 2 threads, in
newrllama (a context without the prefix cache, timed after the same call as warm-up) and in
llama-batched-bench built from the vendored llama.cpp (-npp 512 -npl 1 -ntg 1,128, its first row the warm-up,
started in a user's environment), in turn, 3 repeats.

  - prefill: prompt tokens per second, and the weight matrices' int8 multiply-adds that takes
    (bench/token_costs.py counts them from the file) as a share of the vector unit's and AMX's peak;
  - decode: tokens per second, and the weight bytes each token reads (every tensor once, the embeddings
    one row unless they are the output matrix) times that rate as a share of the read bandwidth.
Each engine's prefill counts its prefill alone; its decode counts the rest of the call (ours: the call's
time after the prefill step, the scheduler's Python included).

    .venv/bin/python bench/bench_limits.py [--model qwen2.5-coder-1.5b] [--repeats 3] [--no-batched-bench]
Writes bench/results/limits-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Dict, List

import newrllama
from bench_models import add_model_argument, model_label, model_path
from bench_results import machine, write_results
from in_turn import Run, run_in_turn
from llama_tools import llama_tool_binary, run_batched_bench_warm
from machine_limits import measure
from reuters import reuters_stories
from token_costs import decode_bytes_per_token, matmul_macs_per_token

N_THREADS = 2
PROMPT_TOKENS = 512
DECODE_STEPS = 128
N_CTX = 1024
NEWRLLAMA = "newrllama"
BATCHED_BENCH = "llama-batched-bench"


def prompt_tokens(model: newrllama.Model) -> List[int]:
    text = "\n\n".join(story for story, _ in reuters_stories())
    return model.tokenize(text)[:PROMPT_TOKENS]


def newrllama_run(model: newrllama.Model) -> Run:
    ctx = newrllama.Context(model, n_ctx=N_CTX, n_seq_max=1, n_threads=N_THREADS, prefix_cache=False)
    prompt = prompt_tokens(model)
    params = newrllama.SamplingParams(max_tokens=DECODE_STEPS + 1)
    ctx.generate(prompt, params)  # the warm-up: the same shapes, timed next

    def run(_repeat: int) -> Dict:
        t0 = time.perf_counter()
        out = ctx.generate(prompt, params)
        seconds = time.perf_counter() - t0
        stats = ctx.last_stats
        steps = len(out.token_ids) - 1  # the first token comes from the prefill step
        return {"seconds": seconds, "prefill_s": stats.t_prompt_s, "prompt_tokens": stats.n_prompt_tokens,
                "decode_s": seconds - stats.t_prompt_s, "decode_steps": steps,
                "prefill_tokens_per_s": stats.n_prompt_tokens / stats.t_prompt_s,
                "decode_tokens_per_s": steps / (seconds - stats.t_prompt_s)}
    return run


def batched_bench_run(binary: str, path: str) -> Run:
    args = ["-c", str(N_CTX), "-b", str(PROMPT_TOKENS), "-ub", str(PROMPT_TOKENS), "-npp", str(PROMPT_TOKENS),
            "-npl", "1"]

    def run(_repeat: int) -> Dict:
        out = run_batched_bench_warm(binary, args, DECODE_STEPS, N_THREADS, path)
        row = out["row"]
        return {**out, "prefill_s": row["T_PP"], "prompt_tokens": int(row["PP"]), "decode_s": row["T_TG"],
                "decode_steps": int(row["TG"]), "prefill_tokens_per_s": row["S_PP"],
                "decode_tokens_per_s": row["S_TG"]}
    return run


def shares(raw: List[Dict], engine: str, limits: dict, macs_per_token: float, bytes_per_token: int) -> Dict:
    """An engine's median rates and what share of the machine's limits they use."""
    def median(key: str) -> float:
        return statistics.median(r["runs"][engine][key] for r in raw)
    prefill, decode = median("prefill_tokens_per_s"), median("decode_tokens_per_s")
    macs = prefill * macs_per_token / 1e9
    out = {"prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode, "prefill_gmacs": macs,
           "prefill_share_of_vector_peak": macs / limits["vector_int8_gmacs"],
           "decode_gb_per_s": decode * bytes_per_token / 1e9,
           "decode_share_of_read_bandwidth": decode * bytes_per_token / 1e9 / limits["read_gb_per_s"]}
    if limits["amx_int8_gmacs"]:
        out["prefill_share_of_amx_peak"] = macs / limits["amx_int8_gmacs"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(ap)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-batched-bench", action="store_true")
    args = ap.parse_args()
    path = model_path(args.model)
    macs_per_token = matmul_macs_per_token(path, PROMPT_TOKENS)
    bytes_per_token = decode_bytes_per_token(path)
    limits = measure(N_THREADS).as_dict()
    print(f"machine, {N_THREADS} threads: read {limits['read_gb_per_s']:.1f} GB/s; int8 peak "
          f"{limits['vector_int8_gmacs']:.0f} GMAC/s ({limits['vector_unit']}), AMX {limits['amx_int8_gmacs']}",
          flush=True)
    model = newrllama.Model(path)
    runs = {NEWRLLAMA: newrllama_run(model)}
    if not args.no_batched_bench:
        runs[BATCHED_BENCH] = batched_bench_run(llama_tool_binary(), path)
    raw = run_in_turn(runs, args.repeats)
    model.close()
    summary = {name: shares(raw, name, limits, macs_per_token, bytes_per_token) for name in runs}
    for name, s in summary.items():
        print(f"{name:<20} prefill {s['prefill_tokens_per_s']:7.1f} tok/s = {s['prefill_gmacs']:6.1f} GMAC/s "
              f"({100 * s['prefill_share_of_vector_peak']:.0f}% of the vector peak); decode "
              f"{s['decode_tokens_per_s']:6.1f} tok/s = {s['decode_gb_per_s']:5.1f} GB/s "
              f"({100 * s['decode_share_of_read_bandwidth']:.0f}% of the read bandwidth)")
    report = {"machine": machine(model_label(path)), "model": model_label(path), "n_threads": N_THREADS,
              "prompt_tokens": PROMPT_TOKENS, "decode_steps": DECODE_STEPS, "repeats": args.repeats,
              "limits": limits, "matmul_macs_per_prompt_token": macs_per_token,
              "decode_bytes_per_token": bytes_per_token, "summary": summary, "raw": raw}
    print(write_results("limits", report))


if __name__ == "__main__":
    main()
