"""system_info() and the C device queries under it."""
from __future__ import annotations

import json
import os
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


CHILD_ENVIRONMENT = """
import json, os, subprocess
before = dict(os.environ)
import newrllama
with newrllama.Model() as model, newrllama.Context(model, n_ctx=512, n_seq_max=1) as ctx:
    ctx.generate("Hello", newrllama.SamplingParams(max_tokens=2))
    fingerprint = ctx.engine_stats().determinism.build
child = subprocess.run(["env", "-0"], capture_output=True, check=True).stdout.decode().split("\\0")
seen = dict(line.split("=", 1) for line in child if "=" in line)
print(json.dumps({"changed": {k: seen.get(k) for k in set(seen) | set(before) if seen.get(k) != before.get(k)},
                  "fingerprint": fingerprint}))
"""


def child_environment(**settings: str) -> dict:
    """What a child process started after importing newrllama and generating finds changed in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("GGML_CPU_TILED_MM_FORCE", "KMP_BLOCKTIME")}
    done = subprocess.run([sys.executable, "-c", CHILD_ENVIRONMENT], capture_output=True, text=True, check=True,
                          env={**env, **settings})
    return json.loads(done.stdout.splitlines()[-1])


def test_a_child_process_inherits_nothing_newrllama_set():
    seen = child_environment()
    assert seen["changed"] == {}
    # ggml's tiled kernel is still taken for every row count, by the build's default rather than the environment
    assert "GGML_CPU_TILED_MM_FORCE=1;" in seen["fingerprint"]


def test_the_users_own_settings_are_kept_and_honoured():
    seen = child_environment(GGML_CPU_TILED_MM_FORCE="0", KMP_BLOCKTIME="50")
    assert seen["changed"] == {}
    assert "GGML_CPU_TILED_MM_FORCE=0;" in seen["fingerprint"]
