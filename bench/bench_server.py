"""The server under concurrent clients against one generate_parallel call of the same prompts.

Starts `python -m newrllama serve --n-seq-max 16` on loopback; for 1, 4, 16 and 64
concurrent clients, each client streams requests (one prompt each, greedy, 48 tokens)
until the shared list of prompts is done. Prints generated tokens per second, the
ratio to one in-process generate_parallel call of the same prompts on a context of the
same shape (run after the server stopped, so they never share the CPU), and the time
to first token (median and 90th percentile). The clients run on the same 2 cores.

    .venv/bin/python bench/bench_server.py [--clients 1 4 16 64] [--prompts 64] [--max-tokens 48]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

import newrllama

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from server_process import ServerProcess  # noqa: E402
from short_prompts import short_prompts  # noqa: E402

N_SEQ = 16
N_THREADS = 2


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


def local_reference(todo, max_tokens: int):
    with newrllama.Model() as model, newrllama.Context(model, n_ctx=N_SEQ * 512, n_seq_max=N_SEQ,
                                                       n_threads=N_THREADS) as ctx:
        ctx.generate_parallel(todo[:N_SEQ], newrllama.SamplingParams(max_tokens=4))  # warm up
        t0 = time.perf_counter()
        done = ctx.generate_parallel(todo, newrllama.SamplingParams(max_tokens=max_tokens))
        return time.perf_counter() - t0, sum(c.n_gen_tokens for c in done)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "bench_server.json"))
    args = parser.parse_args()
    todo = short_prompts(args.prompts)
    rows = []
    with ServerProcess("--n-seq-max", str(N_SEQ), "--n-ctx", str(N_SEQ * 512), "--threads", str(N_THREADS)) as server:
        asyncio.run(drive(server.url, todo[:N_SEQ], N_SEQ, 4))  # warm up
        for clients in args.clients:
            seconds, n_gen, ttfts = asyncio.run(drive(server.url, todo, clients, args.max_tokens))
            ttfts.sort()
            rows.append({"clients": clients, "seconds": seconds, "tokens": n_gen, "tokens_per_s": n_gen / seconds,
                         "ttft_median_s": statistics.median(ttfts), "ttft_p90_s": ttfts[int(0.9 * (len(ttfts) - 1))]})
            print(json.dumps(rows[-1]), file=sys.stderr)
    local_s, local_tokens = local_reference(todo, args.max_tokens)
    local_tps = local_tokens / local_s
    print(f"\n{args.prompts} prompts, {args.max_tokens} greedy tokens each, server --n-seq-max {N_SEQ}, "
          f"{N_THREADS} threads, embedded model; one generate_parallel call: {local_tps:.1f} tokens/s")
    print(f"{'clients':>8} {'tokens/s':>9} {'ratio':>6} {'TTFT median s':>14} {'TTFT p90 s':>11}")
    for r in rows:
        r["over_generate_parallel"] = r["tokens_per_s"] / local_tps
        print(f"{r['clients']:>8} {r['tokens_per_s']:9.1f} {r['over_generate_parallel']:6.2f} "
              f"{r['ttft_median_s']:14.3f} {r['ttft_p90_s']:11.3f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": rows, "generate_parallel_tokens_per_s": local_tps,
                                           "prompts": args.prompts, "max_tokens": args.max_tokens}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
