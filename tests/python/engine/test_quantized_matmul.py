"""The matmul of the weight types whose kernel newrllama patches into llama.cpp (capi_shim/llama_cpp_patch,
q0-gemm-vnni, where the CPU has AVX512-VNNI; tinyBLAS elsewhere), run by the installed ggml on random matrices
of shapes that leave ragged tiles: its results are the exact product of what it multiplies, up to float
rounding, and each output is the same bits alone, in a batch and with any number of threads."""
from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECK = Path(__file__).resolve().parent / "c" / "quantized_matmul_check.c"
spec = importlib.util.spec_from_file_location("newrllama_shim_build", ROOT / "capi_shim" / "build.py")
shim_build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shim_build)


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> Path:
    include, lib = shim_build.llama_cpp_location()  # where the shim itself finds llama.cpp's headers and libraries
    binary = tmp_path_factory.mktemp("matmul") / "quantized_matmul_check"
    subprocess.run([*shlex.split(sysconfig.get_config_var("CC")), "-std=c11", "-O2", str(CHECK),
                    f"-I{include}", f"-L{lib}", "-lggml", "-lggml-base", "-lggml-cpu",
                    f"-Wl,-rpath,{lib}", "-lm", "-o", str(binary)], check=True, capture_output=True, text=True)
    return binary


# Q5_0 and Q8_0 multiply activations rounded to Q8_0, which the check's reference rounds alike.
@pytest.mark.parametrize("type_name", ["q5_0", "q8_0"])
@pytest.mark.parametrize("m, n, k", [(37, 7, 640), (16, 1, 256), (300, 33, 640), (5, 4, 2048)])
def test_products_are_exact_and_the_same_bits_in_any_batch(check, type_name, m, n, k):
    done = subprocess.run([str(check), type_name, str(m), str(n), str(k)], capture_output=True, text=True,
                          check=True, timeout=120, env={"GGML_CPU_TILED_MM_FORCE": "1"})
    result = json.loads(done.stdout)
    assert result["max_error"] <= 1e-6 * result["max_result"] * k ** 0.5, result
    assert result["same_alone"] and result["same_threads"], result
