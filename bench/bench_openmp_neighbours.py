"""One prompt's speed beside another OpenMP team in the process.

llama.cpp's CPU backend runs a decode as an OpenMP region, and libgomp keeps a team of threads for every thread
that has started one. newrllama starts every decode on its one engine thread, but a process may hold other teams:
newrllama's C driver called on the main thread, llama-cpp-python's Llama there, an R package built with OpenMP
(data.table). Once the process holds more OpenMP threads than cores, libgomp stops spinning at its barriers,
and a decode meets hundreds of them a token; newrllama's build meets at its own barrier on Linux (the
futex-barrier patch), and this measures what is left. The results name the CPU library's digest, since the
patches' names do not tell builds apart.

Each case runs in a fresh process (a team, once made, lasts as long as its thread): the model is loaded, a context
of one sequence and 2 threads is warmed up, the case's neighbour runs once on the main thread, then one 16-token
prompt is generated with 48 greedy tokens `--runs` times (the median is the process's figure). The R cases do the
same in an R session, where the neighbour is data.table (Debian's r-cran-data.table; they are left out without
it) and the baseline is R alone. The cases run in turn, their order rotating, `--repeats` times; ratios are
medians of the ratios within a repeat.

    .venv/bin/python bench/bench_openmp_neighbours.py [--model qwen2.5-coder-1.5b] [--repeats 3] [--runs 5]
Writes bench/results/openmp-neighbours-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import newrllama  # noqa: E402
from bench_models import add_model_argument, model_label, model_path  # noqa: E402
from bench_parallel import MAX_TOKENS, N_THREADS, PROMPT_TOKENS, c_driver_engine, parallel_context, sixteen_token_prompts  # noqa: E402
from bench_results import write_results  # noqa: E402
from newrllama.engine.llama.reproducibility import llama_cpp_patches  # noqa: E402

CASES = {
    "alone": "no other OpenMP team",
    "C driver on the main thread": "newrllama_generate_parallel_ex called once from the main thread",
    "llama-cpp-python on the main thread": "llama_cpp.Llama's create_completion called once from the main thread",
    "R alone": "R's generate_parallel, no other OpenMP team",
    "R after data.table": "R's generate_parallel after data.table's setorder() on 2 million numbers with 2 threads",
}
BASELINE = {case: "R alone" if case.startswith("R ") else "alone" for case in CASES}
# The R session: the same prompt as text, the context warmed up, the neighbour (if any), then the timed calls.
R_SCRIPT = """
library(newrllama)
args <- commandArgs(trailingOnly = TRUE)
model <- model_load(args[[1]])
ctx <- context_create(model, n_ctx = 128L, n_threads = as.integer(args[[4]]), n_seq_max = 1L)
prompt <- readLines(args[[2]])
invisible(generate_parallel(ctx, prompt, max_tokens = 2L, progress = FALSE))
if (args[[3]] == "R after data.table") {
  data.table::setDTthreads(2L)
  invisible(data.table::setorder(data.table::data.table(a = runif(2e6)), a))
}
seconds <- vapply(seq_len(as.integer(args[[5]])), function(i) {
  t0 <- Sys.time()
  out <- generate_parallel(ctx, prompt, max_tokens = as.integer(args[[6]]), progress = FALSE)
  stopifnot(attr(out, "stats")$n_gen_tokens == as.integer(args[[6]]))
  as.numeric(difftime(Sys.time(), t0, units = "secs"))
}, numeric(1))
cat(jsonlite::toJSON(seconds, digits = NA), "\n")
"""


def cpu_library_digest() -> str:
    """Which build of llama.cpp's CPU library ran: the patch names do not tell every build apart, its file does."""
    import llama_cpp
    found = sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*"))
    return hashlib.sha256(found[0].read_bytes()).hexdigest()[:12] if found else "unknown"


def neighbour(case: str, model: newrllama.Model, path: str, prompts: List[List[int]]) -> None:
    if case == "C driver on the main thread":
        c_driver_engine(model, prompts)(0)
    elif case == "llama-cpp-python on the main thread":
        from llama_cpp import Llama
        llm = Llama(path, n_ctx=256, n_threads=N_THREADS, verbose=False)
        llm.create_completion(model.detokenize(prompts[0]), max_tokens=2)


def child(case: str, path: str, runs: int) -> List[float]:
    """Seconds of each timed generate_parallel call, in a process whose main thread ran case's neighbour."""
    model = newrllama.Model(path)
    prompts = sixteen_token_prompts(model)[:1]
    with parallel_context(model, 1) as ctx:
        ctx.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=2))
        neighbour(case, model, path, prompts)
        params = newrllama.SamplingParams(max_tokens=MAX_TOKENS)
        seconds = []
        for _ in range(runs):
            t0 = time.perf_counter()
            done = ctx.generate_parallel(prompts, params)
            seconds.append(time.perf_counter() - t0)
            assert done[0].n_gen_tokens == MAX_TOKENS, done[0].finish_reason
    return seconds


def r_has_data_table() -> bool:
    found = shutil.which("Rscript") and subprocess.run(
        ["Rscript", "-e", "quit(status = !requireNamespace('data.table', quietly = TRUE))"]).returncode == 0
    if not found:
        print("R cases left out: no Rscript with data.table here")
    return bool(found)


def prompt_text(path: str) -> str:
    """The Python cases' prompt as one line of text, for R's sessions."""
    with newrllama.Model(path) as model:
        return model.detokenize(sixteen_token_prompts(model)[0]).replace("\n", " ")


def r_child(case: str, path: str, prompt: str, runs: int) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        script, prompt_file = Path(tmp) / "bench.R", Path(tmp) / "prompt.txt"
        script.write_text(R_SCRIPT)
        prompt_file.write_text(prompt + "\n")
        env = dict(os.environ, NEWRLLAMA_PYTHON=sys.executable, R_LIBS=os.environ.get("R_LIBS", str(ROOT / ".Rlib")))
        return subprocess.run(["Rscript", str(script), path, str(prompt_file), case, str(N_THREADS), str(runs),
                               str(MAX_TOKENS)], capture_output=True, text=True, env=env, check=True)


def run_child(case: str, model: str, prompt: str, runs: int) -> Dict:
    if case.startswith("R "):
        out = r_child(case, model_path(model), prompt, runs)
    else:
        out = subprocess.run([sys.executable, __file__, "--child", case, "--model", model, "--runs", str(runs)],
                             capture_output=True, text=True, check=True)
    seconds = json.loads(out.stdout.strip().splitlines()[-1])
    return {"seconds": seconds, "tokens_per_s": MAX_TOKENS / statistics.median(seconds)}


def main() -> int:
    ap = argparse.ArgumentParser()
    add_model_argument(ap)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="timed calls in each process")
    ap.add_argument("--child", choices=list(CASES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = model_path(args.model)
    if args.child:
        print(json.dumps(child(args.child, path, args.runs)))
        return 0
    names = [c for c in CASES if not c.startswith("R ") or r_has_data_table()]
    prompt = prompt_text(path)
    raw = []
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        figures = {}
        for case in order:
            figures[case] = run_child(case, args.model, prompt, args.runs)
            print(f"repeat {repeat + 1}: {case:<40} {figures[case]['tokens_per_s']:7.1f} tokens/s", flush=True)
        raw.append({"order": order, "runs": figures})
    summary = {}
    print(f"\nOne {PROMPT_TOKENS}-token prompt, {MAX_TOKENS} greedy tokens, {N_THREADS} threads, {model_label(path)}; "
          f"llama.cpp patch: {llama_cpp_patches()}; CPU library {cpu_library_digest()}")
    for case in names:
        rate = statistics.median(r["runs"][case]["tokens_per_s"] for r in raw)
        ratio = statistics.median(r["runs"][case]["tokens_per_s"] / r["runs"][BASELINE[case]]["tokens_per_s"]
                                  for r in raw)
        summary[case] = {"what": CASES[case], "tokens_per_s": rate, "over_alone": ratio}
        print(f"{case:>40}: {rate:7.1f} tokens/s, {ratio:.3f}x {BASELINE[case]}")
    write_results("openmp-neighbours", {"model": model_label(path), "llama_cpp_patches": llama_cpp_patches(),
                                        "cpu_library_sha256": cpu_library_digest(),
                                        "max_tokens": MAX_TOKENS, "n_threads": N_THREADS, "repeats": args.repeats,
                                        "runs": args.runs, "summary": summary, "raw": raw})
    return 0


if __name__ == "__main__":
    sys.exit(main())
