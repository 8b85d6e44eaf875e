"""Checks newrllama's matmul kernels for CPUs with AVX-512, AVX512-VNNI and AMX on a machine without them: builds
the pinned llama.cpp with newrllama's patches for Ice Lake servers (-march=icelake-server, statically), builds the
kernel check of tests/python/engine/c/quantized_matmul_check.c against it with AMX tiles in software
(scripts/emulated_amx), and runs it on an emulated CPU (scripts/run_on_emulated_avx512.sh, Bochs's Tiger Lake
model), for each weight type and shape that tests/python/engine/test_quantized_matmul.py takes: every output must be
the same bits alone, in the batch and with 1-3 threads, the same bits as the arithmetic the kernels define, and the
activations rounded as ggml's reference rounds them. The K-quants run twice, with the tiles (quant-gemm-amx takes 8
activation rows and more) and with NEWRLLAMA_AMX=off (quant-gemm-avx2's vpdpbusd panels take them), and the two
must give the same bits. Exit status 0 when every case holds.

What it reaches there: q0-gemm-vnni (Q5_0, Q8_0), quant-gemm-avx2 as the AVX-512 build compiles it (vpdpbusd
panels, the 512-bit one-row path) and quant-gemm-amx, whose tile instructions the emulated CPU refuses and
scripts/emulated_amx/amx_on_sigill.c carries out by their definitions. It takes about 10 minutes on 2 cores: a
bench tool, not a test.

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
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_llama_cpp  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "python"))
from engine import test_quantized_matmul as kernel_test  # noqa: E402  (the types and shapes the kernel test takes)

CHECK = kernel_test.CHECK
RUNNER = ROOT / "scripts" / "run_on_emulated_avx512.sh"
CPUID_WITH_AMX = ROOT / "scripts" / "emulated_amx" / "cpuid_with_amx.h"
AMX_ON_SIGILL = ROOT / "scripts" / "emulated_amx" / "amx_on_sigill.c"
MARCH = "-march=icelake-server"  # what the emulated Tiger Lake runs: AVX-512 with VNNI and VBMI, no AMX or BF16
# Bochs 2.7 refuses (#UD) an EVEX gather whose index register is above 15, which the hardware runs; GCC's
# vectorizer gathers the activation rows' scales in quant-gemm-amx, so it loads them one by one here.
NO_GATHERS = "-mtune-ctrl=^use_gather_2parts,^use_gather_4parts,^use_gather"
CHECKS = ("same_alone", "same_threads", "same_as_defined", "rounding_as_reference")


def build_check(work: Path) -> Path:
    """The kernel check, linked statically with the patched ggml built for AVX-512 CPUs, which ask the emulated AMX
    whether the CPU has tiles (cpuid_with_amx.h) and for them (arch_prctl, wrapped)."""
    source = build_llama_cpp.patched_source(sys.executable, work / "source", build_llama_cpp._clean_env())
    llama_cpp = source / "vendor" / "llama.cpp"
    build = work / "build"
    subprocess.run(["cmake", "-S", str(llama_cpp), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=OFF", "-DLLAMA_CURL=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                    "-DLLAMA_BUILD_SERVER=OFF", f"-DCMAKE_C_FLAGS={MARCH} {NO_GATHERS} -include {CPUID_WITH_AMX}",
                    f"-DCMAKE_CXX_FLAGS={MARCH}",
                    "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_AVX512=ON",
                    "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_VBMI=ON"], check=True, capture_output=True, text=True)
    subprocess.run(["ninja", "-C", str(build), "ggml", "ggml-base", "ggml-cpu"], check=True, capture_output=True,
                   text=True)
    binary = work / "quantized_matmul_check"
    libraries = build / "ggml" / "src"
    subprocess.run(["cc", "-std=c11", "-O2", "-static", str(CHECK), str(AMX_ON_SIGILL), "-Wl,--wrap=syscall",
                    f"-I{llama_cpp / 'ggml' / 'include'}", f"-L{libraries}", "-Wl,--start-group", "-lggml",
                    "-lggml-cpu", "-lggml-base", "-Wl,--end-group", "-lstdc++", "-fopenmp", "-lpthread", "-lm", "-o",
                    str(binary)], check=True, capture_output=True, text=True)
    return binary


Case = Tuple[str, int, int, int, str]  # type, M, N, K, NEWRLLAMA_AMX


def cases() -> List[Case]:
    """Every type by every shape with the tiles on; the K-quants also with them off, and by the AMX test's shapes."""
    on = [(t, m, n, k, "on") for t in sorted(kernel_test.KERNELS_OF) for m, n, k in kernel_test.SHAPES]
    amx = [(t, m, n, k, amx) for t in kernel_test.K_QUANTS for m, n, k in kernel_test.AMX_SHAPES
           for amx in ("on", "off")]
    off = [(t, m, n, k, "off") for t in kernel_test.K_QUANTS for m, n, k in kernel_test.SHAPES]
    return list(dict.fromkeys(on + amx + off))


def guest_script() -> str:
    """One boot runs every case: a line per case, its arguments then the check's JSON."""
    lines = ["#!/bin/sh", "export OMP_WAIT_POLICY=passive", "cd /work"]
    for t, m, n, k, amx in cases():
        lines.append(f'echo "{t} {m} {n} {k} {amx} $(NEWRLLAMA_AMX={amx} ./quantized_matmul_check {t} {m} {n} {k} '
                     f'2>&1 | tr -d \'\\n\')"')
    return "\n".join(lines) + "\n"


def results(output: str) -> Dict[Case, dict]:
    """The guest's lines by case; an unreadable result as {"unreadable": its text}."""
    found: Dict[Case, dict] = {}
    for line in output.splitlines():
        parts = line.split(" ", 5)
        if len(parts) < 6:
            continue
        case = (parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        try:
            found[case] = json.loads(parts[5])
        except json.JSONDecodeError:
            found[case] = {"unreadable": parts[5][:200]}
    return found


def failures(output: str) -> List[str]:
    """What the guest's lines say went wrong: a case missing, unreadable or with a check false, a K-quant case of
    the AMX shapes whose tiles were not granted or whose bits differ without them."""
    found, wrong = results(output), []
    for case in cases():
        name = " ".join(map(str, case))
        result = found.get(case)
        if result is None:
            wrong.append(f"{name}: no result")
        elif "unreadable" in result:
            wrong.append(f"{name}: {result['unreadable']}")
        elif not all(result.get(key) for key in CHECKS):
            wrong.append(f"{name}: not {', '.join(key for key in CHECKS if not result.get(key))}")
        elif case[4] == "on" and case[0] in kernel_test.K_QUANTS and case[1:4] in kernel_test.AMX_SHAPES:
            off = found.get(case[:4] + ("off",), {})
            if not result.get("tiles_permitted"):
                wrong.append(f"{name}: the tiles were not granted")
            elif result.get("digest") != off.get("digest"):
                wrong.append(f"{name}: not the bits of NEWRLLAMA_AMX=off")
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
