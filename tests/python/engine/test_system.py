"""system_info() and the C device queries under it."""
from __future__ import annotations

import subprocess
import sys

import pytest

import newrllama
from newrllama import _lib
from newrllama._lib import ffi, lib
from helpers import repo_modules


def test_system_info_describes_this_build():
    info = newrllama.system_info()
    assert info.llama_cpp_python == repo_modules.llama_cpp_python_version()
    cpu = [d for d in info.devices if d.kind == "cpu"]
    assert cpu and cpu[0].backend == "CPU" and cpu[0].memory_total > 2**20
    assert info.gpu_offload == bool(lib.newrllama_supports_gpu_offload())
    assert info.gpu_offload <= bool(info.gpu_backends)  # offload needs a GPU backend in the build
    assert info.cpu_features and all(isinstance(v, str) for v in info.cpu_features.values())


def test_a_device_outside_the_list_is_an_error_not_a_crash():
    info = ffi.new("newrllama_device_info *")
    for index in (-1, lib.newrllama_device_count(), 2**31 - 1):
        err = _lib.new_error_slot()
        assert lib.newrllama_device_get(index, info, err) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT
        assert b"outside" in ffi.string(err[0])
    err = _lib.new_error_slot()
    assert lib.newrllama_device_get(0, ffi.NULL, err) == lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT


def test_n_gpu_layers_defaults_to_what_the_build_can_do():
    with newrllama.Model() as model:  # None: all layers with a GPU build that finds a device, else none
        assert model.n_vocab > 0
    with pytest.raises(newrllama.InvalidArgumentError, match="n_gpu_layers"):
        newrllama.Model(n_gpu_layers="all")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libstdc++ is Linux's C++ runtime")
def test_the_cxx_runtime_is_global_before_the_shim_loads():
    # A CUDA build's libggml-cuda exports weak copies of libstdc++'s stream code; bound to them, every model load
    # crashed on an H200. What a GPU-less machine can check: after the import, libstdc++'s symbols resolve from the
    # process's global scope, which the interpreter (not linked to libstdc++) does not give by itself.
    probe = ("import ctypes, sys; found = lambda: hasattr(ctypes.CDLL(None), '_ZNSo9_M_insertIlEERSoT_'); "
             "before = found(); import newrllama; print(before, found())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
