"""Attention over bf16 cells with newrllama's patch of llama.cpp, against llama.cpp's own kernels.

batch_invariant=True keeps K and V in bf16, where llama.cpp attends a row cell by cell whatever the number
of rows; newrllama's build patches that path (capi_shim/llama_cpp_patch) to take the same kind of
arithmetic in blocks of cells. Three workloads, each variant in a fresh process per run that first
warms its context at full width on prompts sharing nothing with the timed ones:
  - annotation: one ~430-token instruction, 64 short documents after it, 4 greedy tokens each, 16
    sequences (the annotation workload of bench_vs_llama_server.py, in process);
  - long prompts: 4 distinct prompts of about 1,400 tokens, prefix cache off, one token each (prefill);
  - generation: 16 prompts of 16 tokens, 48 greedy tokens each (bench_parallel.py's shape);
and three variants:
  - "batch_invariant=True": the default, on the patched build;
  - "batch_invariant=True, llama.cpp unpatched": the same, with llama.cpp's CPU library as vendored (built
    by bench/build_llama_tools.sh, AMX off, the same source and flags) put first on LD_LIBRARY_PATH: without
    either of newrllama's patches, so its Q5_0 and Q8_0 weights also go through tinyBLAS;
  - "batch_invariant=False": f16 cells, llama.cpp's own attention (tiled for pieces of 64 rows or more).
Each run also reports a digest of its answers (token ids) and the llama.cpp patch its process loaded, so
that the file shows which variant gave which bits, and that they repeat. Each repeat runs the variants in
turn, the first rotating; ratios are medians of the ratios within a repeat.

    .venv/bin/python bench/bench_attention.py [--repeats 3]
Writes bench/results/attention-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from bench_parallel import MAX_TOKENS, N_THREADS, PROMPT_TOKENS, TEXTS, n_ctx_for
from bench_results import write_results
from bench_vs_llama_server import ANSWER_TOKENS, N_CTX, N_SEQ, annotation_prompts, documents
from in_turn import Run, median_of, run_in_turn, speed_ratio
from llama_tools import llama_tool_binary

LONG_PROMPTS = 4
LONG_WORDS = 1400
CHILD = """
import hashlib, json, sys, time
import newrllama
from newrllama.engine.llama.reproducibility import llama_cpp_patches
spec = json.loads(sys.stdin.read())
with newrllama.Model(None) as model:
    prompts = spec["prompts"]
    if spec["truncate"]:
        prompts = [model.tokenize(p)[:spec["truncate"]] for p in prompts]
    with newrllama.Context(model, n_ctx=spec["n_ctx"], n_seq_max=spec["n_seq"], n_threads=spec["threads"],
                           batch_invariant=spec["invariant"], prefix_cache=spec["prefix_cache"]) as ctx:
        ctx.generate_parallel(spec["warm"], newrllama.SamplingParams(max_tokens=2))
        t0 = time.perf_counter()
        done = ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=spec["max_tokens"]))
        seconds = time.perf_counter() - t0
answers = hashlib.sha256(json.dumps([c.token_ids for c in done]).encode()).hexdigest()[:16]
print(json.dumps({"seconds": seconds, "answers": answers, "llama_cpp_patch": llama_cpp_patches()}))
"""
DEFAULT = "batch_invariant=True"
UNPATCHED = "batch_invariant=True, llama.cpp unpatched"
F16 = "batch_invariant=False"


def long_prompts() -> List[str]:
    rng = random.Random(5)
    words = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have "
             "an they you were her she there had been one all we their has would when if so no will what can more out "
             "up about into them than some time these could only").split()
    return [" ".join(rng.choice(words) for _ in range(LONG_WORDS)) for _ in range(LONG_PROMPTS)]


def workloads() -> Dict[str, dict]:
    # every run first warms its context at full width on prompts that share nothing with the timed ones
    base = {"threads": N_THREADS, "truncate": 0, "prefix_cache": True}
    return {"annotation": {**base, "prompts": annotation_prompts(1, documents(64, 2)), "n_seq": N_SEQ, "n_ctx": N_CTX,
                           "max_tokens": ANSWER_TOKENS},
            "long prompts": {**base, "prompts": long_prompts(), "n_seq": LONG_PROMPTS, "n_ctx": LONG_PROMPTS * 2048,
                             "max_tokens": 1, "prefix_cache": False},
            "generation": {**base, "prompts": TEXTS[:16], "truncate": PROMPT_TOKENS, "n_seq": 16,
                           "n_ctx": n_ctx_for(16), "max_tokens": MAX_TOKENS}}


def child_engine(spec: dict, invariant: bool, library_dir: str = "") -> Run:
    env = dict(os.environ)
    if library_dir:
        env["LD_LIBRARY_PATH"] = library_dir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    arg = json.dumps({**spec, "invariant": invariant, "warm": TEXTS[:spec["n_seq"]]})

    def run(_repeat: int) -> Dict:
        out = subprocess.run([sys.executable, "-c", CHILD], input=arg, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        return json.loads(out.stdout.strip().splitlines()[-1])
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as vendored:
        # llama.cpp's CPU library as vendored, alone: the shim insists on the libllama it was built against
        cpu = next(Path(llama_tool_binary()).parent.glob("libggml-cpu.so.*"))
        (Path(vendored) / "libggml-cpu.so.0").symlink_to(cpu)
        for name, spec in workloads().items():
            runs = {DEFAULT: child_engine(spec, True), UNPATCHED: child_engine(spec, True, vendored),
                    F16: child_engine(spec, False)}
            raw = run_in_turn(runs, args.repeats, f"{name}, ")
            results[name] = {
                "seconds": {v: median_of(raw, v) for v in runs},
                "speed_vs_unpatched": {v: speed_ratio(raw, v, UNPATCHED) for v in runs},
                "answers": {v: sorted({r["runs"][v]["answers"] for r in raw}) for v in runs},
                "llama_cpp_patch": {v: sorted({r["runs"][v]["llama_cpp_patch"] for r in raw}) for v in runs},
                "raw": raw}
    path = write_results("attention", {"n_threads": N_THREADS, "repeats": args.repeats, "long_prompt_words": LONG_WORDS,
                                       "workloads": results})
    for name, w in results.items():
        for v in w["seconds"]:
            print(f"{name:<12} {v:<44} {w['seconds'][v]:7.2f} s  x{w['speed_vs_unpatched'][v]:.2f} unpatched  "
                  f"answers {','.join(w['answers'][v])}  patch {','.join(w['llama_cpp_patch'][v])}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
