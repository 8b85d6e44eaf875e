"""The server under concurrent clients against one generate_parallel call of the same prompts.

Starts `python -m newrllama serve --n-seq-max 16` on loopback; for 1, 4, 16 and 64
concurrent clients, each client streams requests (one prompt each, greedy, 48 tokens)
until the shared list of prompts is done. Prints generated tokens per second, the
speed ratio to one in-process generate_parallel call of the same prompts on a context of the
same shape, and the time to first token (median and 90th percentile). The clients run on
the same 2 cores. The same engine does the same work either way (48 tokens: the prefill and
47 decode steps). The server and the context stay up throughout, each warmed up at full width
first (16 other prompts, 2 tokens each: the prefill and one decode step of all sequences), and
each idles while the other runs; each repeat runs the local call and every number of clients in
turn, the first rotating between repeats; rates and times to first token are medians over the
repeats, ratios medians of the ratios within a repeat.

    .venv/bin/python bench/bench_server.py [--clients 1 4 16 64] [--prompts 64] [--max-tokens 48] [--repeats 2]
Writes bench/results/server-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Dict

import httpx

import newrllama
from bench_results import write_results
from in_turn import Run, median_of, paired_median, run_in_turn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from helpers.server_process import ServerProcess  # noqa: E402
from short_prompts import short_prompts  # noqa: E402

N_SEQ = 16
N_THREADS = 2
WARM_TOKENS = 2
LOCAL = "one generate_parallel call"


async def one_request(http: httpx.AsyncClient, prompt: str, max_tokens: int):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    n_gen = 0
    async with http.stream("POST", "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if ttft is None and event["choices"] and event["choices"][0]["text"]:
                ttft = time.perf_counter() - t0
            if event.get("usage"):
                n_gen = event["usage"]["completion_tokens"]
    return ttft if ttft is not None else time.perf_counter() - t0, n_gen


async def drive(url: str, todo, clients: int, max_tokens: int):
    queue: "asyncio.Queue[str]" = asyncio.Queue()
    for p in todo:
        queue.put_nowait(p)
    ttfts, tokens = [], []

    async def client(http):
        while not queue.empty():
            ttft, n = await one_request(http, queue.get_nowait(), max_tokens)
            ttfts.append(ttft)
            tokens.append(n)

    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*[client(http) for _ in range(clients)])
        return time.perf_counter() - t0, sum(tokens), ttfts


def server_engine(url: str, todo, clients: int, max_tokens: int) -> Run:
    def run(_repeat: int) -> Dict:
        seconds, tokens, ttfts = asyncio.run(drive(url, todo, clients, max_tokens))
        ttfts.sort()
        return {"seconds": seconds, "tokens": tokens, "ttft_median_s": statistics.median(ttfts),
                "ttft_p90_s": ttfts[int(0.9 * (len(ttfts) - 1))]}
    return run


def local_engine(ctx: newrllama.Context, todo, max_tokens: int) -> Run:
    def run(_repeat: int) -> Dict:
        t0 = time.perf_counter()
        done = ctx.generate_parallel(todo, newrllama.SamplingParams(max_tokens=max_tokens))
        return {"seconds": time.perf_counter() - t0, "tokens": sum(c.n_gen_tokens for c in done)}
    return run


def rate(figures: Dict) -> float:
    return figures["tokens"] / figures["seconds"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2, help="runs of every engine, in turn")
    args = parser.parse_args()
    todo = short_prompts(args.prompts)
    warm = short_prompts(args.prompts + N_SEQ)[-N_SEQ:]  # other prompts, full width
    shape = {"n_ctx": N_SEQ * 512, "n_seq_max": N_SEQ, "n_threads": N_THREADS}
    with ServerProcess("--n-seq-max", str(N_SEQ), "--n-ctx", str(shape["n_ctx"]), "--threads", str(N_THREADS)) \
            as server, newrllama.Model() as model, newrllama.Context(model, **shape) as ctx:
        asyncio.run(drive(server.url, warm, N_SEQ, WARM_TOKENS))
        ctx.generate_parallel(warm, newrllama.SamplingParams(max_tokens=WARM_TOKENS))
        engines = {LOCAL: local_engine(ctx, todo, args.max_tokens)}
        engines.update((f"server, {k} clients", server_engine(server.url, todo, k, args.max_tokens))
                       for k in args.clients)
        raw = run_in_turn(engines, args.repeats)
    local_tps = statistics.median(rate(r["runs"][LOCAL]) for r in raw)
    print(f"\n{args.prompts} prompts, {args.max_tokens} greedy tokens each, server --n-seq-max {N_SEQ}, "
          f"{N_THREADS} threads, embedded model; one generate_parallel call: {local_tps:.1f} tokens/s; medians of "
          f"{args.repeats} repeats, ratios: medians of the ratios within a repeat")
    print(f"{'clients':>8} {'tokens/s':>9} {'ratio':>6} {'TTFT median s':>14} {'TTFT p90 s':>11}")
    rows = []
    for clients in args.clients:
        e = f"server, {clients} clients"
        rows.append({"clients": clients, "tokens_per_s": statistics.median(rate(r["runs"][e]) for r in raw),
                     "over_generate_parallel": paired_median(raw, lambda runs: rate(runs[e]) / rate(runs[LOCAL])),
                     "ttft_median_s": median_of(raw, e, "ttft_median_s"), "ttft_p90_s": median_of(raw, e, "ttft_p90_s")})
        r = rows[-1]
        print(f"{clients:>8} {r['tokens_per_s']:9.1f} {r['over_generate_parallel']:6.2f} "
              f"{r['ttft_median_s']:14.3f} {r['ttft_p90_s']:11.3f}")
    write_results("server", {"prompts": args.prompts, "max_tokens": args.max_tokens, "n_seq": N_SEQ,
                             "threads": N_THREADS, "n_ctx": shape["n_ctx"], "repeats": args.repeats,
                             "generate_parallel_tokens_per_s": local_tps, "rows": rows, "raw": raw})
    return 0


if __name__ == "__main__":
    sys.exit(main())
