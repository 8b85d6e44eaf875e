"""Where a benchmark's results go: bench/results/<name>-<date>-<cpu>[-<rerun>].json (bench/results/gpu/ with the GPU's
name where layers were offloaded), never over an earlier file,
with the commit, command, machine and time they came from (bench/report.py shows them beside every table)."""
from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

RESULTS = Path(__file__).resolve().parent / "results"


def _cpuinfo(field: str) -> str:
    """The first CPU's value of a /proc/cpuinfo field, or "" where there is none."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith(field):
            return line.split(":", 1)[1].strip()
    return ""


def cpu_name() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown"


def cpu_kind() -> str:
    """The instruction set the engine's integer kernels take on this CPU (docs/design/limits.md, by CPU kind): AMX
    tiles, AVX512-VNNI, AVX-VNNI or AVX2 alone; the CPU's name does not say it (an AMD EPYC may be either of two)."""
    flags = set(_cpuinfo("flags").split())
    for flag, kind in (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                       ("avx2", "AVX2")):
        if flag in flags:
            return kind
    return "no AVX2"


def accelerator() -> Optional[str]:
    """The first GPU llama.cpp offloads to here (its description), or None on a build or machine without one."""
    import newrllama
    info = newrllama.system_info()
    gpus = [d for d in info.devices if d.kind != "cpu"] if info.gpu_offload else []
    return gpus[0].description if gpus else None


def commit() -> str:
    """The checkout's commit, with "+changes" when files git tracks differ from it: the code behind a figure."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


# Taken when a benchmark starts, as it imports this module: a long run must name the code it loaded, not what the
# checkout held when it finished.
STARTED_AT_COMMIT = commit()


def machine(model: Optional[str] = None) -> dict:
    """The CPU and its kind, the commit the benchmark started from, the versions (llama-cpp-python: the llama.cpp that newrllama and bench/.tools are built
    from), the model (the embedded one unless the benchmark names another), the command that ran the benchmark
    and when (UTC)."""
    import newrllama
    return {"cpu": cpu_name(), "cpu_kind": cpu_kind(), "accelerator": accelerator(), "commit": STARTED_AT_COMMIT, "python": platform.python_version(), "newrllama": newrllama.__version__,
            "llama_cpp_python": importlib.metadata.version("llama-cpp-python"),
            "model": model or Path(newrllama.default_model_path()).name,
            "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def write_results(name: str, report: dict) -> Path:
    day = datetime.date.today().isoformat()
    gpu = accelerator()
    # Figures from a GPU stay apart from the CPU figures that the README's headline and the benchmarks page draw on.
    folder = RESULTS / "gpu" if gpu else RESULTS
    cpu = "".join(ch if ch.isalnum() else "-" for ch in gpu or cpu_name()).strip("-")[:40]
    out = folder / f"{name}-{day}-{cpu}.json"
    # A rerun on the same day keeps the earlier file: committed figures stay tied to their results.
    rerun = 2
    while out.exists():
        out = folder / f"{name}-{day}-{cpu}-{rerun}.json"
        rerun += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("x") as f:  # "x": a file that appeared meanwhile is an error, not overwritten
        f.write(json.dumps({"machine": machine(report.get("model")), **report}, indent=1))
    print(f"wrote {out}")
    return out
