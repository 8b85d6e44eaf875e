"""The cluster against one local generate_parallel call of the same prompts, on this machine.

1. Throughput: the same prompts (greedy, --max-tokens each, output file on) through a local
   Context of 16 sequences on all cores, a 1-worker cluster of 16 sequences on all cores and a
   2-worker cluster of 8 sequences each with the cores shared out: 16 sequences in flight in
   every engine, so that all decode batches of the same width. Generated tokens per second and the
   speed ratio to the local call. Cluster start-up (Ray runtime and model loads) is timed apart, as
   it is paid once per session.
2. Cost of the sharding and of the file per 1,000 prompts: --small prompts of one token each,
   locally and on the 2-worker cluster with and without the output file; the driver's own time
   (checking, sharding, sending, collecting) and the file's time (writing and fsync) as the cluster
   reports them.
3. A sizing line: prompts per hour per worker at this prompt and answer length.
   In 1-3 every engine stays up through the measurements and is warmed up at full width first
   (16 other prompts, 2 tokens each: the prefill and one decode step of all sequences); each
   repeat runs the engines in turn, the first rotating between repeats; rates are medians over
   the repeats, ratios medians of the ratios within a repeat. Written to
   bench/results/cluster-vs-local-<date>-<cpu>.json.
4. A shared instruction across chunks: --shared-docs prompts under one ~1,300-token
   instruction (4 greedy tokens each), in one local call and on a 1-worker cluster
   (chunks of n_seq_max prompts, several in flight on the worker); the prompt tokens
   each decoded (prompt minus cached tokens), and from them how many times the
   instruction was decoded: once per worker if the chunks share it, once per chunk
   if they do not. Both warmed up at full width, then in turn as in 1-3, a new
   instruction in every repeat. Written to
   bench/results/cluster-shared-instruction-<date>-<cpu>.json.

    .venv/bin/python bench/bench_cluster.py [--prompts 128] [--max-tokens 48] [--small 1000] [--repeats 2]
                                            [--shared-docs 64] [--only-shared]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from typing import Dict, List

import newrllama
from bench_annotate import CODEBOOK, OBJECTS, SUBJECTS, TOPICS, VERBS, prompt_tokens_decoded
from bench_results import write_results
from in_turn import Run, median_of, paired_median, run_in_turn, speed_ratio
from newrllama.engine.calls.context import usable_cores
from short_prompts import short_prompts

N_SEQ = 16
WARM_TOKENS = 2
LOCAL = "local generate_parallel"


def call_figures(call, prompts: List[str], params: newrllama.SamplingParams, with_file: bool) -> Dict:
    """Seconds and tokens of one call(prompts, params, output=...) with its output file written to a temporary
    directory or none."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "answers.jsonl") if with_file else None
        t0 = time.perf_counter()
        done = call(prompts, params, output=out)
        seconds = time.perf_counter() - t0
    failed = [c.error for c in done if c.finish_reason == "error"]
    if failed:
        raise SystemExit(f"{len(failed)} prompts failed, for example: {failed[0]}")
    return {"seconds": seconds, "tokens": sum(c.n_gen_tokens for c in done),
            "cached_tokens": sum(c.n_cached_tokens for c in done)}


def local_engine(ctx: newrllama.Context, prompts, params, with_file: bool) -> Run:
    return lambda _repeat: call_figures(ctx.generate_parallel, prompts, params, with_file)


def cluster_engine(cluster: newrllama.Cluster, prompts, params, with_file: bool) -> Run:
    def run(_repeat: int) -> Dict:
        out = call_figures(cluster.generate_parallel, prompts, params, with_file)
        s = cluster.last_stats
        return {**out, "t_total_s": s.t_total_s, "t_driver_s": s.t_driver_s, "t_write_s": s.t_write_s,
                "chunks": s.n_chunks}
    return run


def rate(figures: Dict) -> float:
    return figures["tokens"] / figures["seconds"]


def cluster_vs_local(args) -> None:
    import ray
    cores = usable_cores()
    half = max(1, cores // 2)
    todo = short_prompts(args.prompts)
    warm = short_prompts(args.prompts + N_SEQ)[-N_SEQ:]  # other prompts, full width
    small = short_prompts(args.small)
    params, one = newrllama.SamplingParams(max_tokens=args.max_tokens), newrllama.SamplingParams(max_tokens=1)
    one_worker, two_workers = f"cluster, 1 worker x {N_SEQ} sequences x {cores} threads", \
        f"cluster, 2 workers x {N_SEQ // 2} sequences x {half} thread(s)"
    # One Ray runtime with room for both clusters (their workers idle while another engine runs).
    ray.init(address="local", num_cpus=cores + 2 * half, include_dashboard=False, log_to_driver=False,
             logging_level="error")
    try:
        startup = {}
        t0 = time.perf_counter()
        big = newrllama.Cluster(num_workers=1, threads_per_worker=cores, n_seq_max=N_SEQ)
        startup[one_worker] = time.perf_counter() - t0
        t0 = time.perf_counter()
        split = newrllama.Cluster(num_workers=2, threads_per_worker=half, n_seq_max=N_SEQ // 2)
        startup[two_workers] = time.perf_counter() - t0
        with newrllama.Model() as model, newrllama.Context(model, n_ctx=1024 * N_SEQ, n_seq_max=N_SEQ,
                                                           n_threads=cores) as ctx, big, split:
            warm_up = newrllama.SamplingParams(max_tokens=WARM_TOKENS)
            for call in (ctx.generate_parallel, big.generate_parallel, split.generate_parallel):
                call(warm, warm_up)
            throughput = run_in_turn({LOCAL: local_engine(ctx, todo, params, True),
                                      one_worker: cluster_engine(big, todo, params, True),
                                      two_workers: cluster_engine(split, todo, params, True)},
                                     args.repeats, label="throughput, ")
            machinery = run_in_turn({LOCAL: local_engine(ctx, small, one, False),
                                     "cluster, no file": cluster_engine(split, small, one, False),
                                     "cluster, output file": cluster_engine(split, small, one, True)},
                                    args.repeats, label=f"{args.small} one-token prompts, ")
    finally:
        ray.shutdown()

    rates = {e: statistics.median(rate(r["runs"][e]) for r in throughput) for e in throughput[0]["order"]}
    ratios = {e: paired_median(throughput, lambda runs: rate(runs[e]) / rate(runs[LOCAL])) for e in rates if e != LOCAL}
    print(f"\n{args.prompts} prompts x {args.max_tokens} tokens, output file on; {cores} cores; {N_SEQ} sequences in "
          f"flight in every engine; medians of {args.repeats} repeats, ratios: medians within a repeat")
    print(f"{'run':<52}{'s':>8}{'tok/s':>9}{'speed ratio':>13}")
    for e, r in rates.items():
        print(f"{e:<52}{median_of(throughput, e):>8.2f}{r:>9.1f}{ratios.get(e, 1.0):>13.2f}")
    print("start-up (Ray runtime + model loads): " + ", ".join(f"{e} {s:.1f} s" for e, s in startup.items()))

    per_k = 1000 / args.small
    small_rows = {}
    print(f"\n{args.small} prompts of one token (figures per 1,000 prompts; 2 workers x {N_SEQ // 2} sequences):")
    for e in machinery[0]["order"]:
        row = {"s_per_1000": median_of(machinery, e) * per_k,
               "speed_over_local": speed_ratio(machinery, e, LOCAL)}
        if e != LOCAL:
            row.update(driver_ms_per_1000=median_of(machinery, e, "t_driver_s") * per_k * 1000,
                       file_ms_per_1000=median_of(machinery, e, "t_write_s") * per_k * 1000,
                       chunks=machinery[0]["runs"][e]["chunks"])
        small_rows[e] = row
        print(f"  {e:<26}{row['s_per_1000']:7.2f} s  speed ratio to local {row['speed_over_local']:.2f}"
              + (f"  driver {row['driver_ms_per_1000']:6.1f} ms  file {row['file_ms_per_1000']:6.1f} ms  "
                 f"chunks {row['chunks']}" if e != LOCAL else ""))

    per_worker_hour = args.prompts / median_of(throughput, two_workers) * 3600 / 2
    print(f"\nsizing: {per_worker_hour:,.0f} prompts/hour per worker ({half} thread(s)) at "
          f"~{len(todo[0].split())} words in, {args.max_tokens} tokens out")
    write_results("cluster-vs-local", {
        "prompts": args.prompts, "max_tokens": args.max_tokens, "small": args.small, "cores": cores, "n_seq": N_SEQ,
        "repeats": args.repeats, "startup_s": startup, "tokens_per_s": rates, "speed_over_local": ratios,
        "one_token_prompts": small_rows, "prompts_per_hour_per_worker": per_worker_hour,
        "raw": {"throughput": throughput, "one_token_prompts": machinery}})


def instruction_prompts(instruction: str, n_docs: int) -> List[str]:
    rng = random.Random(11)
    return [f"{instruction}\nStory {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.\nLabel:"
            for i in range(n_docs)]


def shared_instruction(n_docs: int, repeats: int) -> None:
    rules = "".join(CODEBOOK.format(k=k + 1, topic=t) for k, t in enumerate(TOPICS))
    instruction = "You are a careful news coder. " + rules * 2
    # The warm-up: full width, under an instruction that shares no start with the timed one's.
    warm = instruction_prompts("You are a careful wire editor. " + rules * 2, N_SEQ)
    params = newrllama.SamplingParams(max_tokens=4)
    decoded: Dict[str, Dict] = {}

    def engine(name: str, call) -> Run:
        def run(repeat: int) -> Dict:
            # New prompts in every repeat: the cache must not serve a repeat what the one before decoded.
            prompts = instruction_prompts(f"Task {repeat}. {instruction}", n_docs)
            t0 = time.perf_counter()
            done = call(prompts, params)
            seconds = time.perf_counter() - t0
            failed = [c.error for c in done if c.finish_reason == "error"]
            if failed:
                raise SystemExit(f"{len(failed)} prompts failed, for example: {failed[0]}")
            decoded[name] = prompt_tokens_decoded(done, n_instruction)
            return {"seconds": seconds, **decoded[name]}
        return run

    with newrllama.Model() as model, newrllama.Context(model, n_ctx=2048 * N_SEQ, n_seq_max=N_SEQ) as ctx, \
            newrllama.Cluster(num_workers=1, n_seq_max=N_SEQ, n_ctx=2048 * N_SEQ) as cluster:
        n_instruction = len(model.tokenize(f"Task 0. {instruction}"))
        for call in (ctx.generate_parallel, cluster.generate_parallel):
            call(warm, newrllama.SamplingParams(max_tokens=WARM_TOKENS))
        raw = run_in_turn({"local_one_call": engine("local_one_call", ctx.generate_parallel),
                           "cluster_1_worker": engine("cluster_1_worker", cluster.generate_parallel)}, repeats,
                          label="shared instruction, ")
        n_chunks = cluster.last_stats.n_chunks
    report = {"docs": n_docs, "instruction_tokens": n_instruction, "n_seq_max": N_SEQ, "chunks": n_chunks,
              "repeats": repeats, "raw": raw}
    report.update((name, {"seconds": median_of(raw, name), **decoded[name]}) for name in decoded)
    print(f"\n{n_docs} prompts under one {n_instruction}-token instruction, 4 tokens each; cluster: 1 worker, "
          f"{n_chunks} chunks of {N_SEQ}; seconds: medians of {repeats} repeats in turn")
    for name in ("local_one_call", "cluster_1_worker"):
        r = report[name]
        print(f"  {name:<18}{r['seconds']:8.2f} s   prompt tokens decoded {r['prompt_tokens_decoded']:6d}   "
              f"instruction decoded {r['instruction_decodes']:.2f} times")
    write_results("cluster-shared-instruction", report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--small", type=int, default=1000, help="prompts of one token for the overhead figure")
    parser.add_argument("--repeats", type=int, default=2, help="runs of every engine, in turn")
    parser.add_argument("--shared-docs", type=int, default=64, help="prompts under one instruction (0: skip)")
    parser.add_argument("--only-shared", action="store_true", help="only the shared-instruction measurement")
    args = parser.parse_args()
    if args.shared_docs:
        shared_instruction(args.shared_docs, args.repeats)
    if not args.only_shared:
        cluster_vs_local(args)


if __name__ == "__main__":
    main()
