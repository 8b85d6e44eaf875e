"""Checks newrllama's matmul kernels for CPUs with AVX-512 and AVX512-VNNI on a machine without them: builds the
pinned llama.cpp with newrllama's patches for Ice Lake servers (-march=icelake-server, statically), builds the
kernel check of tests/python/engine/c/quantized_matmul_check.c against it, and runs it on an emulated CPU
(scripts/run_on_emulated_avx512.sh, Bochs's Tiger Lake model), for each weight type and shape that
tests/python/engine/test_quantized_matmul.py takes: every output must be the same bits alone, in the batch and
with 1-3 threads, the same bits as the arithmetic the kernels define, and the activations rounded as ggml's
reference rounds them. Exit status 0 when every case holds.

What it reaches there: q0-gemm-vnni (Q5_0, Q8_0) and quant-gemm-avx2 as the AVX-512 build compiles it (vpdpbusd
panels, the 512-bit one-row path); not quant-gemm-amx, which the emulated CPU lacks (the kernel then leaves every
row count to quant-gemm-avx2). It takes about 10 minutes on 2 cores: a bench tool, not a test.

Usage: python scripts/check_kernels_emulated.py [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_llama_cpp  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "python"))
from engine import test_quantized_matmul as kernel_test  # noqa: E402  (the types and shapes the kernel test takes)

CHECK = kernel_test.CHECK
RUNNER = ROOT / "scripts" / "run_on_emulated_avx512.sh"
MARCH = "-march=icelake-server"  # what the emulated Tiger Lake runs: AVX-512 with VNNI and VBMI, no AMX or BF16


def build_check(work: Path) -> Path:
    """The kernel check, linked statically with the patched ggml built for AVX-512 CPUs."""
    source = build_llama_cpp.patched_source(sys.executable, work / "source", build_llama_cpp._clean_env())
    llama_cpp = source / "vendor" / "llama.cpp"
    build = work / "build"
    subprocess.run(["cmake", "-S", str(llama_cpp), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=OFF", "-DLLAMA_CURL=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                    "-DLLAMA_BUILD_SERVER=OFF", f"-DCMAKE_C_FLAGS={MARCH}", f"-DCMAKE_CXX_FLAGS={MARCH}",
                    "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_AVX512=ON",
                    "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_VBMI=ON"], check=True, capture_output=True, text=True)
    subprocess.run(["ninja", "-C", str(build), "ggml", "ggml-base", "ggml-cpu"], check=True, capture_output=True,
                   text=True)
    binary = work / "quantized_matmul_check"
    libraries = build / "ggml" / "src"
    subprocess.run(["cc", "-std=c11", "-O2", "-static", str(CHECK), f"-I{llama_cpp / 'ggml' / 'include'}",
                    f"-L{libraries}", "-Wl,--start-group", "-lggml", "-lggml-cpu", "-lggml-base", "-Wl,--end-group",
                    "-lstdc++", "-fopenmp", "-lpthread", "-lm", "-o", str(binary)], check=True, capture_output=True,
                   text=True)
    return binary


def cases() -> List[Tuple[str, int, int, int]]:
    return [(t, m, n, k) for t in sorted(kernel_test.KERNELS_OF) for m, n, k in kernel_test.SHAPES]


def guest_script() -> str:
    """One boot runs every case: a line per case, its arguments then the check's JSON."""
    lines = ["#!/bin/sh", "export OMP_WAIT_POLICY=passive", "cd /work"]
    for t, m, n, k in cases():
        lines.append(f'echo "{t} {m} {n} {k} $(./quantized_matmul_check {t} {m} {n} {k} 2>&1 | tr -d \'\\n\')"')
    return "\n".join(lines) + "\n"


def failures(output: str) -> List[str]:
    """What the guest's lines say went wrong: a case missing, unreadable or with a check false."""
    seen, wrong = set(), []
    for line in output.splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 5:
            continue
        case = (parts[0], int(parts[1]), int(parts[2]), int(parts[3]))
        seen.add(case)
        try:
            result = json.loads(parts[4])
        except json.JSONDecodeError:
            wrong.append(f"{' '.join(parts[:4])}: {parts[4][:200]}")
            continue
        false = [key for key in ("same_alone", "same_threads", "same_as_defined", "rounding_as_reference")
                 if not result.get(key)]
        if false:
            wrong.append(f"{' '.join(parts[:4])}: not {', '.join(false)}")
    wrong += [f"{' '.join(map(str, c))}: no result" for c in cases() if c not in seen]
    return wrong


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="folder for the build (a temporary one by default)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="newrllama-emulated-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"[emulated] building the patched ggml with {MARCH} in {work}", file=sys.stderr, flush=True)
        binary = build_check(work)
        script = work / "cases.sh"
        script.write_text(guest_script())
        print(f"[emulated] running {len(cases())} cases on the emulated CPU", file=sys.stderr, flush=True)
        done = subprocess.run(["bash", str(RUNNER), "-f", str(binary), "-f", str(script), "guest:/bin/sh",
                               "/work/cases.sh"], capture_output=True, text=True)
        print(done.stdout, end="")
        if done.returncode != 0:
            print(f"[emulated] the guest ended with status {done.returncode}: {done.stderr[-2000:]}", file=sys.stderr)
            return 1
    wrong = failures(done.stdout)
    for w in wrong:
        print(f"[emulated] FAILED {w}", file=sys.stderr)
    print(f"[emulated] {len(cases()) - len(wrong)} of {len(cases())} cases hold "
          f"(command: {shlex.join([sys.executable, *sys.argv])})", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
