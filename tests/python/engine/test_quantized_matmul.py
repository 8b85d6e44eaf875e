"""The matmul of the weight types whose kernels newrllama patches into llama.cpp (capi_shim/llama_cpp_patch:
q0-gemm-vnni for Q5_0 and Q8_0 where the CPU has AVX512-VNNI, q0-gemm-avx2 where it has AVX2 only; quant-gemm-avx2 for Q4_K, Q5_K
and Q6_K where it has AVX2 (its panels of several rows with vpdpbusd where it has AVX512-VNNI or AVX-VNNI), and
quant-gemm-amx for them from 8 activation rows up where it has AMX-INT8), run by
the installed ggml on random matrices of shapes that leave ragged tiles: its
results are the exact product of what it multiplies, up to float rounding; each output is the same bits alone, in
a batch and with any number of threads; and where newrllama's kernel is compiled in, each output is the same bits
as the arithmetic the kernels define, computed one output at a time in plain C (so any unit that implements it,
AVX2, AVX512-VNNI or AMX, gives these bits)."""
from __future__ import annotations

import functools
import json
import re
import shlex
import subprocess
import sysconfig
from pathlib import Path
from typing import Dict, Tuple

import pytest

from helpers import repo_modules

ROOT = repo_modules.ROOT
CHECK = Path(__file__).resolve().parent / "c" / "quantized_matmul_check.c"
shim_build = repo_modules.load("capi_shim/build.py", "newrllama_shim_build")

# The kernels of newrllama that may take each type (one of them is compiled in, by the CPU's units).
KERNELS_OF = {"q5_0": ("q0-gemm-vnni", "q0-gemm-avx2"), "q8_0": ("q0-gemm-vnni", "q0-gemm-avx2"),
              "q4_K": ("quant-gemm-avx2",), "q5_K": ("quant-gemm-avx2",), "q6_K": ("quant-gemm-avx2",)}


def kernel_of(type_name: str, kernels: frozenset) -> str:
    """The kernel of newrllama compiled in for the type, or "" where llama.cpp's own takes it."""
    return next((k for k in KERNELS_OF[type_name] if k in kernels), "")
SHAPES = [(37, 7, 768), (16, 1, 256), (300, 33, 1536), (5, 4, 2048), (9, 2, 512),  # M weight rows, N, K
          (70, 67, 512), (16, 16, 256), (40, 13, 512), (24, 8, 512),  # and tiles of 16 activation rows: in pairs, whole, ragged, half
          (300, 1, 512), (200, 3, 256),  # and a few activation rows by several chunks of weight rows, the last ragged
          (1100, 1, 256), (1100, 2, 256),  # and by chunks of a large matrix's share of a thread (not 64 rows), ragged
          (24, 5, 256),  # and a chunk of 3 tiles: 2 panels together, then 1 alone
          (20, 70, 10240)]  # and rows long enough that a chunk holds 64 activation rows (short ones hold up to 256)
K_QUANTS = ("q4_K", "q5_K", "q6_K")
AMX_SHAPES = [s for s in SHAPES if s[1] >= 8] + [(48, 130, 768)]  # the rows quant-gemm-amx takes, and many tiles


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> Tuple[Path, frozenset]:
    """The check compiled against the installed ggml, and the names of newrllama's kernels in its CPU library."""
    include, lib = shim_build.llama_cpp_location()  # where the shim itself finds llama.cpp's headers and libraries
    binary = tmp_path_factory.mktemp("matmul") / "quantized_matmul_check"
    subprocess.run([*shlex.split(sysconfig.get_config_var("CC")), "-std=c11", "-O2", str(CHECK),
                    f"-I{include}", f"-L{lib}", "-lggml", "-lggml-base", "-lggml-cpu",
                    f"-Wl,-rpath,{lib}", "-lm", "-o", str(binary)], check=True, capture_output=True, text=True)
    names = set()
    for library in Path(lib).glob("libggml-cpu*"):
        names |= {m.decode() for m in re.findall(rb"newrllama-llama-cpp-patch: ([A-Za-z0-9_-]+)", library.read_bytes())}
    return binary, frozenset(names)


@functools.lru_cache(maxsize=None)
def run(check: Tuple[Path, frozenset], type_name: str, m: int, n: int, k: int, amx: str = "on") -> Dict:
    binary, kernels = check
    # Where newrllama's kernel does not take the type, newrllama's build takes ggml's tiled kernel for every row
    # count by default (patch tiled-forced-by-default), with nothing in the environment.
    env = {"NEWRLLAMA_AMX": amx}
    done = subprocess.run([str(binary), type_name, str(m), str(n), str(k)], capture_output=True, text=True,
                          check=True, timeout=120, env=env)
    return json.loads(done.stdout)


# Q5_0 and Q8_0 multiply activations rounded to Q8_0, the K-quants activations rounded to Q8_K; the check's
# reference rounds them alike.
@pytest.mark.parametrize("type_name", sorted(KERNELS_OF))
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_products_are_exact_and_the_same_bits_in_any_batch(check, type_name, m, n, k):
    result = run(check, type_name, m, n, k)
    assert result["max_error"] <= 1e-6 * result["max_result"] * k ** 0.5, result
    assert result["same_alone"] and result["same_threads"], result
    assert result["rounding_as_reference"], result  # newrllama's rounding to Q8_K is ggml's reference's, bit for bit


@pytest.mark.parametrize("type_name", sorted(KERNELS_OF))
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_newrllamas_kernels_give_the_bits_of_the_defined_arithmetic(check, type_name, m, n, k):
    if not kernel_of(type_name, check[1]):
        pytest.skip(f"none of {', '.join(KERNELS_OF[type_name])} is compiled into this llama.cpp (this CPU lacks "
                    f"their units): {type_name} takes llama.cpp's own kernel, batch-invariant with other bits")
    assert run(check, type_name, m, n, k)["same_as_defined"], (type_name, m, n, k)


# Q3_K is a type none of newrllama's kernels take. ggml's tiled kernel takes its steps of every row count in
# newrllama's build (patch tiled-forced-by-default), with nothing set in the environment, so a row's numbers are the
# same alone and in a batch; a user's GGML_CPU_TILED_MM_FORCE=0 still puts ggml back to vec_dot below 8 rows.
def test_a_type_without_newrllamas_kernels_is_batch_invariant_by_default(check):
    binary, _ = check

    def alone_as_in_batch(env: Dict[str, str]) -> bool:
        done = subprocess.run([str(binary), "q3_K", "24", "16", "512"], capture_output=True, text=True, check=True,
                              timeout=120, env=env)
        return json.loads(done.stdout)["same_alone"]

    assert alone_as_in_batch({})
    assert not alone_as_in_batch({"GGML_CPU_TILED_MM_FORCE": "0"})


def cpu_has_amx_int8() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "") \
        if cpuinfo.is_file() else ""
    return "amx_int8" in flags.split()


# A row computed by the tiles and by quant-gemm-avx2 is the same bits: the whole batch once with the tiles and once
# with NEWRLLAMA_AMX=off (also compared row by row, alone, by the tests above).
@pytest.mark.parametrize("type_name", K_QUANTS)
@pytest.mark.parametrize("m, n, k", AMX_SHAPES)
def test_amx_tiles_give_the_bits_of_the_avx2_kernel(check, type_name, m, n, k):
    if "quant-gemm-amx" not in check[1]:
        pytest.skip("quant-gemm-amx is not compiled into this llama.cpp (its CPU lacks AVX-512 VNNI or VBMI, or the build is not "
                    "for Linux on x86-64): quant-gemm-avx2 takes every row count")
    if not cpu_has_amx_int8():
        pytest.skip("this CPU has no AMX-INT8: quant-gemm-avx2 takes every row count")
    with_tiles = run(check, type_name, m, n, k)
    if not with_tiles["tiles_permitted"]:
        pytest.skip("the kernel refused this process the AMX tiles: quant-gemm-avx2 takes every row count")
    without = run(check, type_name, m, n, k, amx="off")
    assert not without["tiles_permitted"], "NEWRLLAMA_AMX=off should keep the tiles unasked for"
    assert with_tiles["digest"] == without["digest"], (type_name, m, n, k)
    assert with_tiles["same_as_defined"] and with_tiles["same_alone"], with_tiles
