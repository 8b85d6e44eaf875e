"""llama.cpp's own tools (llama-batched-bench, llama-server), built from the vendored llama.cpp of the pinned
llama-cpp-python, as references."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import newrllama

ROOT = Path(__file__).resolve().parents[1]


def llama_tool_binary(target: str = "llama-batched-bench") -> str:
    """Builds one of llama.cpp's tools once (bench/build_llama_tools.sh, AMX off) and returns its path."""
    tool = subprocess.run(["bash", str(ROOT / "bench" / "build_llama_tools.sh"), target], capture_output=True,
                          text=True)
    if tool.returncode != 0:
        raise RuntimeError(f"building {target} failed: {tool.stderr[-2000:]}")
    return tool.stdout.strip().splitlines()[-1]


def reference_env() -> Dict[str, str]:
    """The environment a reference tool runs in, as a user starts it: without GGML_CPU_TILED_MM_FORCE, which a
    benchmark may set for newrllama and which would slow llama.cpp's own tool down for steps of fewer than 8 rows.
    newrllama itself sets nothing there (tests/python/engine/test_system.py)."""
    return {k: v for k, v in os.environ.items() if k != "GGML_CPU_TILED_MM_FORCE"}


def batched_bench_command(binary: str, args: List[str], n_threads: int, model_path: Optional[str] = None) -> List[str]:
    return [binary, "-m", model_path or newrllama.default_model_path(), "-t", str(n_threads), "-tb", str(n_threads)] + args


def run_batched_bench(binary: str, args: List[str], n_threads: int,
                      model_path: Optional[str] = None) -> List[Dict[str, float]]:
    """One run on the model (the embedded one by default); a dict per row of its table (PP, TG, B, N_KV, T_PP, S_PP,
    T_TG, S_TG, T, S)."""
    out = subprocess.run(batched_bench_command(binary, args, n_threads, model_path), capture_output=True, text=True,
                         timeout=3600, env=reference_env())
    if out.returncode != 0:
        raise RuntimeError(f"llama-batched-bench failed: {out.stderr[-2000:]}")
    keys = ["PP", "TG", "B", "N_KV", "T_PP", "S_PP", "T_TG", "S_TG", "T", "S"]
    rows = []
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(keys) and cells[0].isdigit():
            rows.append({k: float(v) for k, v in zip(keys, cells)})
    return rows


def run_batched_bench_warm(binary: str, args: List[str], n_tg: int, n_threads: int,
                           model_path: Optional[str] = None) -> Dict:
    """One shape (args without -ntg, one -npp and one -npl entry) with n_tg decode steps, timed after a warm-up.

    llama-batched-bench's own warm-up is one 16-token sequence, so its first row's full-width passes run
    cold. Asking for "-ntg 1,<n_tg>" first runs the same shape with one decode step (every sequence's
    prefill, then one step of all of them), which is dropped. Returns the timed row's seconds (T), its
    row, the warm-up row and the command."""
    args = args + ["-ntg", f"1,{n_tg}"]
    rows = run_batched_bench(binary, args, n_threads, model_path)
    if len(rows) != 2 or rows[1]["TG"] != n_tg:
        raise RuntimeError(f"llama-batched-bench gave {len(rows)} rows for a warm-up and a timed one: {rows}")
    return {"seconds": rows[1]["T"], "row": rows[1], "warm_up": rows[0],
            "command": " ".join(batched_bench_command(binary, args, n_threads, model_path))}
