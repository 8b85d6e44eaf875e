"""The cluster against one local generate_parallel call of the same prompts, on this machine.

1. Throughput: the same prompts (greedy, --max-tokens each) through a local Context
   (n_seq_max 16, all cores), a 1-worker cluster (all cores) and a 2-worker cluster
   (the cores shared out), each with the output file on; generated tokens per second and
   the ratio to the local call. Cluster start-up (Ray runtime and model loads) is timed
   apart, as it is paid once per session.
2. Cost of the sharding and of the file per 1,000 prompts: 1,000 prompts of one token
   each, locally and on the 2-worker cluster with and without the output file; the
   driver's own time (checking, sharding, sending, collecting) and the file's time
   (writing and fsync) as the cluster reports them.
3. A sizing line: prompts per hour per worker at this prompt and answer length.
4. A shared instruction across chunks: --shared-docs prompts under one ~450-token
   instruction (4 greedy tokens each), in one local call and on a 1-worker cluster
   (chunks of n_seq_max prompts, several in flight on the worker); the prompt tokens
   each decoded (prompt minus cached tokens), and from them how many times the
   instruction was decoded: once per worker if the chunks share it, once per chunk
   if they do not. Written to bench/results/cluster-shared-instruction-<date>-<cpu>.json.

    .venv/bin/python bench/bench_cluster.py [--prompts 128] [--max-tokens 48] [--small 1000]
                                            [--shared-docs 64] [--only-shared]
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

import newrllama
from bench_annotate import CODEBOOK, OBJECTS, SUBJECTS, TOPICS, VERBS
from bench_results import write_results
from newrllama.context import usable_cores
from short_prompts import short_prompts

N_SEQ = 16


def local_run(todo, params):
    with newrllama.Model() as model, newrllama.Context(model, n_ctx=1024 * N_SEQ, n_seq_max=N_SEQ) as ctx:
        t0 = time.perf_counter()
        done = ctx.generate_parallel(todo, params)
        return time.perf_counter() - t0, sum(c.n_gen_tokens for c in done)


def cluster_runs(workers: int, runs):
    """Starts a cluster, does every run (prompts, params, with_file), returns start-up time and per-run figures."""
    t0 = time.perf_counter()
    with newrllama.Cluster(num_workers=workers, n_seq_max=N_SEQ) as cluster:
        startup = time.perf_counter() - t0
        figures = []
        for todo, params, with_file in runs:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "answers.jsonl") if with_file else None
                done = cluster.generate_parallel(todo, params, output=out)
                s = cluster.last_stats
                figures.append((s.t_total_s, sum(c.n_gen_tokens for c in done), s))
        return startup, figures


def shared_instruction(n_docs: int) -> None:
    rules = "".join(CODEBOOK.format(k=k + 1, topic=t) for k, t in enumerate(TOPICS))
    instruction = "You are a careful news coder. " + rules * 2
    rng = random.Random(11)
    prompts = [f"{instruction}\nStory {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.\nLabel:"
               for i in range(n_docs)]
    params = newrllama.SamplingParams(max_tokens=4)
    with newrllama.Model() as model:
        n_instruction = len(model.tokenize(instruction))
        with newrllama.Context(model, n_ctx=2048 * N_SEQ, n_seq_max=N_SEQ) as ctx:
            t0 = time.perf_counter()
            local = ctx.generate_parallel(prompts, params)
            t_local = time.perf_counter() - t0
    with newrllama.Cluster(num_workers=1, n_seq_max=N_SEQ, n_ctx=2048 * N_SEQ) as cluster:
        spread = cluster.generate_parallel(prompts, params)
        t_cluster, n_chunks = cluster.last_stats.t_total_s, cluster.last_stats.n_chunks
    failed = [c.error for c in local + spread if c.finish_reason == "error"]
    if failed:
        raise SystemExit(f"{len(failed)} prompts failed, for example: {failed[0]}")

    def decoded(done) -> dict:
        n = sum(c.n_prompt_tokens - c.n_cached_tokens for c in done)
        own = sum(c.n_prompt_tokens - n_instruction for c in done)
        return {"prompt_tokens_decoded": n, "instruction_decodes": (n - own) / n_instruction}
    report = {"docs": n_docs, "instruction_tokens": n_instruction, "n_seq_max": N_SEQ, "chunks": n_chunks,
              "local_one_call": {"seconds": t_local, **decoded(local)},
              "cluster_1_worker": {"seconds": t_cluster, **decoded(spread)}}
    print(f"\n{n_docs} prompts under one {n_instruction}-token instruction, 4 tokens each; cluster: 1 worker, "
          f"{n_chunks} chunks of {N_SEQ}")
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
    parser.add_argument("--shared-docs", type=int, default=64, help="prompts under one instruction (0: skip)")
    parser.add_argument("--only-shared", action="store_true", help="only the shared-instruction measurement")
    args = parser.parse_args()
    if args.shared_docs:
        shared_instruction(args.shared_docs)
    if args.only_shared:
        return
    todo = short_prompts(args.prompts)
    params = newrllama.SamplingParams(max_tokens=args.max_tokens)
    small = short_prompts(args.small)
    one = newrllama.SamplingParams(max_tokens=1)
    cores = usable_cores()
    print(f"{args.prompts} prompts x {args.max_tokens} tokens; {cores} cores; n_seq_max {N_SEQ} per worker")

    t_local, n_local = local_run(todo, params)
    t_local_small, _ = local_run(small, one)
    up1, (big1,) = cluster_runs(1, [(todo, params, True)])
    up2, (big2, small_nofile, small_file) = cluster_runs(2, [(todo, params, True), (small, one, False),
                                                             (small, one, True)])

    local_rate = n_local / t_local
    print(f"\n{'run':<34}{'s':>8}{'tok/s':>9}{'ratio':>8}")
    print(f"{'local generate_parallel':<34}{t_local:>8.2f}{local_rate:>9.1f}{1.0:>8.2f}")
    for name, (t, n, _) in [(f"cluster 1 worker x {cores} threads", big1),
                            (f"cluster 2 workers x {max(1, cores // 2)} threads", big2)]:
        print(f"{name:<34}{t:>8.2f}{n / t:>9.1f}{n / t / local_rate:>8.2f}")
    print(f"start-up (Ray runtime + model loads): 1 worker {up1:.1f} s, 2 workers {up2:.1f} s")

    per_k = 1000 / args.small
    print(f"\n{args.small} prompts of one token (figures per 1,000 prompts):")
    print(f"  local call                {t_local_small * per_k:7.2f} s")
    for name, (t, _, s) in [("cluster, no file", small_nofile), ("cluster, output file", small_file)]:
        print(f"  {name:<26}{t * per_k:7.2f} s   driver {s.t_driver_s * per_k * 1000:6.1f} ms   "
              f"file {s.t_write_s * per_k * 1000:6.1f} ms   chunks {s.n_chunks}")

    per_worker_hour = args.prompts / big2[0] * 3600 / 2
    print(f"\nsizing: {per_worker_hour:,.0f} prompts/hour per worker ({max(1, cores // 2)} thread(s)) at "
          f"~{len(todo[0].split())} words in, {args.max_tokens} tokens out")


if __name__ == "__main__":
    main()
