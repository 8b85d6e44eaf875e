"""`newrllama serve` against llama.cpp's own llama-server, and both against the in-process path.

Both servers are started as users start them (llama-server built from the vendored
llama.cpp by bench/build_llama_tools.sh; `python -m newrllama serve`), with 16
sequences (slots), 2,048 KV cells each and 2 threads, on the embedded model (or --model), and are
driven by the same 16 concurrent clients (the openai package's AsyncOpenAI), greedy:
- annotation: one ~430-token instruction no engine has seen, 64 short documents, 4
  tokens each (round 1); then 64 new documents under the same instruction (round 2);
- nothing shared: 64 such prompts, each starting with its own document (no common start);
- free generation: 64 short prompts, 128 tokens each;
- chat: 16 conversations of 5 turns (32 tokens per answer), each turn sending the whole
  conversation so far through /v1/chat/completions.
llama-server as users start it keeps gemma 3's sliding-window layers in a cache of the
window's size, so a slot can take a new prompt's start from its cached one only back to a
checkpoint near that prompt's end, and decodes every annotation prompt in full; the
workloads whose prompts repeat a start (annotation, chat) also run on `llama-server
--swa-full` (a full-size cache, where its slots reuse a cached start), and our server's
rate is also given as a ratio to that one.
Each repeat runs every workload on every server in turn, the first server alternating
between repeats, after a warm-up at full width on each; ratios are medians of the
ratios within each repeat. Beside them, in this process and while both servers idle:
round 1 as one Context.generate_parallel call of 64 documents; 16 threads each calling
Context.generate() on one document against one call of those 16; the chat's 16
conversations from 16 threads with the prefix cache on and off (each turn decoded in
full).

    .venv/bin/python bench/bench_vs_llama_server.py [--repeats 2] [--docs 64] [--workloads "nothing shared" ...]
        [--model qwen2.5-coder-1.5b]
Writes bench/results/vs-llama-server-<date>-<cpu>.json (with --workloads:
vs-llama-server-<workloads>-<date>-<cpu>.json).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import httpx
from openai import AsyncOpenAI

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import newrllama  # noqa: E402
from bench_annotate import CODEBOOK, OBJECTS, SUBJECTS, TOPICS, VERBS  # noqa: E402
from bench_models import add_model_argument, model_label, model_path  # noqa: E402
from bench_results import write_results  # noqa: E402
from llama_tools import llama_tool_binary, reference_env  # noqa: E402
from helpers.server_process import ServerProcess, free_port  # noqa: E402
from short_prompts import short_prompts  # noqa: E402

N_SEQ = 16
N_THREADS = 2
N_CTX = N_SEQ * 2048
CLIENTS = 16
ANSWER_TOKENS = 4
FREE_TOKENS = 128
CHAT_TURNS = 5
CHAT_TOKENS = 32
# `newrllama serve` in the shape of llama-server's: N_SEQ sequences (slots) sharing N_CTX cells, N_THREADS threads.
OUR_SERVER_ARGS = ("--n-seq-max", str(N_SEQ), "--n-ctx", str(N_CTX), "--threads", str(N_THREADS))
FOLLOW_UPS = ["Tell me more.", "Why is that?", "Give an example.", "Sum it up in one sentence."]


def instruction(task: int) -> str:
    """About 430 tokens: the issue's workload has a ~450-token instruction with the document after it."""
    rules = "".join(CODEBOOK.format(k=k + 1, topic=t) for k, t in enumerate(TOPICS[:10]))
    return f"Coding task {task}. You are a careful news coder. " + rules


def documents(n: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}, and {rng.choice(SUBJECTS).lower()} "
            f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(n)]


def annotation_prompts(task: int, docs: List[str]) -> List[str]:
    return [f"{instruction(task)}\nStory: {d}\nLabel:" for d in docs]


def unshared_prompts(task: int, docs: List[str]) -> List[str]:
    """The same tokens of work, but every prompt starts with its own document: no start is shared."""
    return [f"Story: {d}\n{instruction(task)}\nLabel:" for d in docs]


class LlamaServer:
    """llama-server on a free loopback port, as a user starts it."""

    def __init__(self, binary: str, path: str, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [binary, "-m", path, "--host", "127.0.0.1", "--port", str(self.port),
             "-np", str(N_SEQ), "-c", str(N_CTX), "-t", str(N_THREADS), "-tb", str(N_THREADS), *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env=reference_env())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.seek(0)
                raise RuntimeError(f"llama-server exited: {self._log.read()[-2000:]!r}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("llama-server was not healthy after 120 s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


async def drive(url: str, jobs: List, run_one: Callable, clients: int = CLIENTS) -> Dict[str, float]:
    """Runs the jobs with that many concurrent clients; returns seconds and tokens generated."""
    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", timeout=3600, max_retries=0,
                         http_client=httpx.AsyncClient(limits=httpx.Limits(max_connections=clients + 4), timeout=3600))
    queue: "asyncio.Queue" = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    generated: List[int] = []

    async def worker() -> None:
        while not queue.empty():
            generated.append(await run_one(client, queue.get_nowait()))

    t0 = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(clients)])
    seconds = time.perf_counter() - t0
    await client.close()
    return {"seconds": seconds, "jobs": len(jobs), "tokens": sum(generated)}


def completion(max_tokens: int):
    async def run_one(client: AsyncOpenAI, prompt: str) -> int:
        r = await client.completions.create(model="model", prompt=prompt, max_tokens=max_tokens, temperature=0)
        return r.usage.completion_tokens
    return run_one


async def conversation(client: AsyncOpenAI, opening: str) -> int:
    messages = [{"role": "user", "content": opening}]
    n = 0
    for turn in range(CHAT_TURNS):
        r = await client.chat.completions.create(model="model", messages=messages, max_tokens=CHAT_TOKENS,
                                                 temperature=0)
        n += r.usage.completion_tokens
        messages.append({"role": "assistant", "content": r.choices[0].message.content})
        if turn < CHAT_TURNS - 1:
            messages.append({"role": "user", "content": FOLLOW_UPS[turn % len(FOLLOW_UPS)]})
    return n


def openings(n: int) -> List[str]:
    return [f"Tell me about {p[:-1].lower()}." for p in short_prompts(n)]


def server_workloads(task: int, n_docs: int) -> Dict[str, tuple]:
    return {"annotation round 1": (annotation_prompts(task, documents(n_docs, 2 * task)), completion(ANSWER_TOKENS)),
            "annotation round 2": (annotation_prompts(task, documents(n_docs, 2 * task + 1)), completion(ANSWER_TOKENS)),
            "nothing shared": (unshared_prompts(task, documents(n_docs, 1000 + task)), completion(ANSWER_TOKENS)),
            "free generation": (short_prompts(n_docs), completion(FREE_TOKENS)),
            "chat, 5 turns": (openings(CLIENTS), conversation)}


def in_threads(fn: Callable, items: List) -> float:
    t0 = time.perf_counter()
    threads = [threading.Thread(target=fn, args=(item,)) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def in_process(model: newrllama.Model, task: int, n_docs: int) -> Dict[str, float]:
    """The in-process references, each on a new context (nothing cached before it)."""
    greedy = newrllama.SamplingParams(max_tokens=ANSWER_TOKENS)
    out = {}

    def context(prefix_cache: bool = True) -> newrllama.Context:
        return newrllama.Context(model, n_ctx=N_CTX, n_seq_max=N_SEQ, n_threads=N_THREADS, prefix_cache=prefix_cache)

    prompts = annotation_prompts(task, documents(n_docs, 2 * task))
    with context() as ctx:
        t0 = time.perf_counter()
        ctx.generate_parallel(prompts, greedy)
        out["annotation, one call"] = time.perf_counter() - t0
    with context() as ctx:
        t0 = time.perf_counter()
        ctx.generate_parallel(prompts[:N_SEQ], greedy)
        out["16 prompts, one call"] = time.perf_counter() - t0
    sixteen = annotation_prompts(task + 1000, documents(N_SEQ, 3000 + task))
    with context() as ctx:
        out["16 prompts, 16 threads calling generate()"] = in_threads(lambda p: ctx.generate(p, greedy), sixteen)
    chat = newrllama.SamplingParams(max_tokens=CHAT_TOKENS)
    for cache in (True, False):
        with context(cache) as ctx:
            def talk(opening: str) -> None:
                messages = [{"role": "user", "content": opening}]
                for turn in range(CHAT_TURNS):
                    answer = ctx.generate(model.apply_chat_template(messages), chat).text
                    messages.append({"role": "assistant", "content": answer})
                    messages.append({"role": "user", "content": FOLLOW_UPS[turn % len(FOLLOW_UPS)]})
            out[f"chat, 5 turns, prefix cache {'on' if cache else 'off'}"] = in_threads(talk, openings(CLIENTS))
    return out


# Our server without the prefix cache (a KV stream per sequence, as llama-server's slots) runs the
# workloads where nothing is shared.
PLAIN = "newrllama serve --no-prefix-cache"
PLAIN_WORKLOADS = ("nothing shared", "free generation")
# llama-server with a full-size sliding-window cache, where its slots reuse a cached prompt start, runs the
# workloads whose prompts repeat one.
SWA_FULL = "llama-server --swa-full"
SWA_FULL_WORKLOADS = ("annotation round 1", "annotation round 2", "chat, 5 turns")


def unit_of(workload: str) -> str:
    return "tokens" if workload in ("free generation", "chat, 5 turns") else "docs"


def rate_of(r: Dict, workload: str, engine: str) -> float:
    """Documents or tokens per second of one engine on one workload in repeat r."""
    result = r["servers"][f"{workload} | {engine}"]
    return (result["tokens"] if unit_of(workload) == "tokens" else result["jobs"]) / result["seconds"]


def engines_of(workload: str) -> List[str]:
    return (["llama-server", "newrllama serve"] + ([PLAIN] if workload in PLAIN_WORKLOADS else [])
            + ([SWA_FULL] if workload in SWA_FULL_WORKLOADS else []))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--workloads", nargs="+", choices=list(server_workloads(1, 1)),
                    help="only these server workloads (default: all)")
    add_model_argument(ap)
    args = ap.parse_args()
    path = model_path(args.model)
    chosen = args.workloads or list(server_workloads(1, 1))
    binary = llama_tool_binary("llama-server")
    raw: List[Dict] = []
    ours_args = (*OUR_SERVER_ARGS, "--model", path)
    with LlamaServer(binary, path) as theirs, LlamaServer(binary, path, "--swa-full") as theirs_full, \
            ServerProcess(*ours_args) as ours, ServerProcess(*ours_args, "--no-prefix-cache") as plain, \
            newrllama.Model(path) as model:
        label = model_label(path)
        engines = {"llama-server": theirs.url, SWA_FULL: theirs_full.url, "newrllama serve": ours.url,
                   PLAIN: plain.url}
        warm = short_prompts(N_SEQ)
        for url in engines.values():
            asyncio.run(drive(url, warm, completion(8)))
        for repeat in range(args.repeats):
            row: Dict[str, Dict] = {}
            for name, (jobs, run_one) in server_workloads(repeat + 1, args.docs).items():
                if name not in chosen:
                    continue
                order = engines_of(name)
                order = order[repeat % len(order):] + order[:repeat % len(order)]
                for engine in order:
                    row[f"{name} | {engine}"] = asyncio.run(drive(engines[engine], jobs, run_one))
                    print(f"repeat {repeat + 1} {name:>20} {engine:>34}: "
                          f"{row[f'{name} | {engine}']['seconds']:7.1f} s", flush=True)
            local = in_process(model, 100 + repeat, args.docs)
            for name, seconds in local.items():
                print(f"repeat {repeat + 1} {name:>44}: {seconds:7.1f} s", flush=True)
            raw.append({"servers": row, "in_process_s": local})

    def median_ratio(fn: Callable[[Dict], float]) -> float:
        return statistics.median(fn(r) for r in raw)

    def server_s(r: Dict, workload: str, engine: str) -> float:
        return r["servers"][f"{workload} | {engine}"]["seconds"]

    workloads: Dict[str, Dict] = {}
    print(f"\n{args.docs} documents per workload, {CLIENTS} concurrent clients, {N_SEQ} sequences, {N_THREADS} threads, "
          f"{label}; median over {args.repeats} repeats of ratios to llama-server within a repeat")
    for workload in chosen:
        engines_here = engines_of(workload)
        workloads[workload] = {
            "unit": f"{unit_of(workload)}/s",
            "rates": {e: statistics.median(rate_of(r, workload, e) for r in raw) for e in engines_here},
            "ratios": {e: median_ratio(lambda r: rate_of(r, workload, e) / rate_of(r, workload, "llama-server"))
                       for e in engines_here[1:]}}
        for e in engines_here:
            ratio = workloads[workload]["ratios"].get(e)
            print(f"{workload:>22} {e:>34} {workloads[workload]['rates'][e]:9.2f} {unit_of(workload)}/s"
                  + (f" {ratio:6.2f}" if ratio else ""))
    in_proc = {}
    if "annotation round 1" in chosen:
        in_proc["annotation round 1 over HTTP / one in-process call"] = median_ratio(
            lambda r: r["in_process_s"]["annotation, one call"] / server_s(r, "annotation round 1", "newrllama serve"))
    in_proc["16 threads calling generate() / one 16-prompt call"] = median_ratio(
        lambda r: r["in_process_s"]["16 prompts, one call"] / r["in_process_s"]["16 prompts, 16 threads calling generate()"])
    in_proc["chat in process: cache on / cache off (speed)"] = median_ratio(
        lambda r: r["in_process_s"]["chat, 5 turns, prefix cache off"] / r["in_process_s"]["chat, 5 turns, prefix cache on"])
    for name, value in in_proc.items():
        print(f"{name}: {value:.2f}x")
    against_swa_full = {
        workload: median_ratio(lambda r: rate_of(r, workload, "newrllama serve") / rate_of(r, workload, SWA_FULL))
        for workload in chosen if workload in SWA_FULL_WORKLOADS}
    for name, value in against_swa_full.items():
        print(f"{name}, newrllama serve / {SWA_FULL}: {value:.2f}x")
    name = "vs-llama-server" + ("-" + "-".join(w.split(",")[0].replace(" ", "-") for w in chosen) if args.workloads else "")
    write_results(name, {"model": label, "repeats": args.repeats, "docs": args.docs, "clients": CLIENTS, "n_seq": N_SEQ,
                         "threads": N_THREADS, "n_ctx": N_CTX, "llama_server": binary,
                         "workloads": workloads, "in_process": in_proc, "against_swa_full": against_swa_full,
                         "raw": raw})


if __name__ == "__main__":
    main()
