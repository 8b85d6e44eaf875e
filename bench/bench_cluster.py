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

    .venv/bin/python bench/bench_cluster.py [--prompts 128] [--max-tokens 48] [--small 1000]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import newrllama
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--small", type=int, default=1000, help="prompts of one token for the overhead figure")
    args = parser.parse_args()
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
