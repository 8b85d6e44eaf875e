"""The documentation's code (the pages' Python and R blocks, the R vignette) runs on the real model for minutes, and
its outcome can change only with what it runs on: the library (Python, C shim, R package), the code itself and the
CPU's kernels. A run that succeeded is remembered under the digest of all of that, in the cache
($NEWRLLAMA_CACHE_DIR/doc-runs), so that a change to the tests, the benchmarks or the prose does not run it again;
any change to the library does. NEWRLLAMA_DOC_RUNS=always runs everything whatever is remembered.

    python tests/python/helpers/doc_runs.py key vignette r_package/vignettes/coding-a-corpus.Rmd r_package/_pkgdown.yml
    python tests/python/helpers/doc_runs.py dir KEY        # the folder a run keeps its outputs in
"""
from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[3]
# What the documentation's code runs on: the library in its three languages and how it is built.
LIBRARY = ("python_core/newrllama", "capi_shim", "r_package/R", "r_package/DESCRIPTION", "r_package/NAMESPACE",
           "pyproject.toml", "setup.py", "scripts/setup.sh", "scripts/build_llama_cpp.py")
BUILT = {".so", ".o", ".pyc"}


def _files(paths: Iterable[str]) -> Iterable[Path]:
    for name in paths:
        path = ROOT / name
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        yield from (p for p in found if p.suffix not in BUILT and "__pycache__" not in p.parts
                    and not any(part.endswith(".egg-info") for part in p.parts))


def _cpu() -> str:
    """The CPU's name and features: they choose the kernels the code runs on."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return "\n".join(sorted({l for l in lines if l.startswith(("model name", "flags"))}))


def key(kind: str, code: str, extra_files: Iterable[str] = ()) -> str:
    digest = hashlib.sha256()
    for part in (kind, code, _cpu(), platform.machine()):
        digest.update(part.encode() + b"\0")
    for path in [*_files(LIBRARY), *_files(extra_files)]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def folder(run_key: str) -> Path:
    base = Path(os.environ.get("NEWRLLAMA_CACHE_DIR") or Path.home() / ".cache" / "newrllama")
    return base / "doc-runs" / run_key


def ran(run_key: str) -> bool:
    """Whether this code already succeeded on these inputs (never when NEWRLLAMA_DOC_RUNS=always)."""
    return os.environ.get("NEWRLLAMA_DOC_RUNS") != "always" and (folder(run_key) / "succeeded").exists()


def remember(run_key: str) -> None:
    path = folder(run_key)
    path.mkdir(parents=True, exist_ok=True)
    (path / "succeeded").write_text("")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "key":
        kind, *files = args
        print(key(kind, "", files))
    elif command == "dir":
        print(folder(args[0]))
    elif command == "ran":
        sys.exit(0 if ran(args[0]) else 1)
    elif command == "remember":
        remember(args[0])
    else:
        sys.exit(f"unknown command {command!r}: key, dir, ran or remember")
