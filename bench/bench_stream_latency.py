"""What a streaming client waits for between tokens while other clients' long prompts are prefilled.

A batch of the "nothing shared" workload of bench_vs_llama_server.py (64 distinct ~450-token prompts, 4
greedy tokens each) goes through 15 concurrent clients, so one of the 16 sequences (slots) stays free;
while it runs, one more client streams answers of 32 greedy tokens through /v1/completions, one after
another. Every step carries the stream's token, on both servers, with or without the prefix cache. Printed per engine: the batch's seconds, the stream's time to first token and its
gaps between tokens (median, 90th percentile, largest), counting only tokens that arrived while the batch
ran. Engines go in turn (bench/in_turn.py), each warmed up at full width first.

    .venv/bin/python bench/bench_stream_latency.py [--repeats 2]
Writes bench/results/stream-latency-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import httpx
from openai import AsyncOpenAI

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

from bench_results import write_results  # noqa: E402
from bench_vs_llama_server import (ANSWER_TOKENS, N_SEQ, N_THREADS, OUR_SERVER_ARGS, LlamaServer,  # noqa: E402
                                   completion, documents, drive, unshared_prompts)
from in_turn import median_of, paired_median, run_in_turn  # noqa: E402
from llama_tools import llama_tool_binary  # noqa: E402
from helpers.server_process import ServerProcess  # noqa: E402
from short_prompts import short_prompts  # noqa: E402

BATCH_CLIENTS = N_SEQ - 1
STREAM_TOKENS = 32
STREAM_PROMPT = "Count from one to one hundred in words: one, two, three,"


async def stream_while(url: str, batch_done: asyncio.Event) -> Dict[str, List[float]]:
    """Streams answers one after another until the batch is done; the first token's wait and the gaps
    between tokens that arrived while the batch ran."""
    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", timeout=3600, max_retries=0)
    first, gaps = [], []
    while not batch_done.is_set():
        t0 = time.perf_counter()
        last = None
        stream = await client.completions.create(model="model", prompt=STREAM_PROMPT, max_tokens=STREAM_TOKENS,
                                                 temperature=0, stream=True)
        async for chunk in stream:
            if not chunk.choices or not chunk.choices[0].text:
                continue
            now = time.perf_counter()
            if batch_done.is_set():
                break
            if last is None:
                first.append(now - t0)
            else:
                gaps.append(now - last)
            last = now
        await stream.close()
    await client.close()
    return {"first_token_s": first, "gaps_s": gaps}


async def batch_beside_stream(url: str, prompts: List[str]) -> Dict:
    done = asyncio.Event()
    batch_task = asyncio.create_task(drive(url, prompts, completion(ANSWER_TOKENS), clients=BATCH_CLIENTS))
    batch_task.add_done_callback(lambda _: done.set())
    await asyncio.sleep(2.0)  # the batch's prefill is under way when the stream starts
    streamed = await stream_while(url, done)
    batch = await batch_task
    gaps = sorted(streamed["gaps_s"])
    return {"seconds": batch["seconds"], **streamed,
            "gap_median_s": statistics.median(gaps), "gap_p90_s": gaps[int(0.9 * (len(gaps) - 1))],
            "gap_max_s": gaps[-1], "first_token_median_s": statistics.median(streamed["first_token_s"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    binary = llama_tool_binary("llama-server")
    with LlamaServer(binary) as theirs, ServerProcess(*OUR_SERVER_ARGS) as unified, \
            ServerProcess(*OUR_SERVER_ARGS, "--no-prefix-cache") as split:
        urls = {"llama-server": theirs.url, "newrllama serve": unified.url,
                "newrllama serve --no-prefix-cache": split.url}
        for url in urls.values():
            asyncio.run(drive(url, short_prompts(N_SEQ), completion(8)))

        def engine(url: str):
            return lambda repeat: asyncio.run(
                batch_beside_stream(url, unshared_prompts(200 + repeat, documents(64, 2000 + repeat))))
        raw = run_in_turn({name: engine(url) for name, url in urls.items()}, args.repeats)
    figures = ("seconds", "first_token_median_s", "gap_median_s", "gap_p90_s", "gap_max_s")
    medians = {name: {f: median_of(raw, name, f) for f in figures} for name in urls}
    print(f"\n{'engine':>34} {'batch s':>8} {'1st tok s':>9} {'gap med':>8} {'gap p90':>8} {'gap max':>8}")
    for name, m in medians.items():
        print(f"{name:>34} " + " ".join(f"{m[f]:8.2f}" for f in figures))
    batch_speed = {name: paired_median(raw, lambda r, n=name: r["llama-server"]["seconds"] / r[n]["seconds"])
                   for name in urls if name != "llama-server"}
    for name, ratio in batch_speed.items():
        print(f"batch speed, {name} / llama-server: {ratio:.2f}x")
    write_results("stream-latency", {"repeats": args.repeats, "n_seq": N_SEQ, "threads": N_THREADS,
                                     "batch_clients": BATCH_CLIENTS, "stream_tokens": STREAM_TOKENS,
                                     "llama_server": binary, "medians": medians,
                                     "batch_speed_vs_llama_server": batch_speed, "raw": raw})


if __name__ == "__main__":
    main()
