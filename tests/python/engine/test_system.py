"""system_info() and the C device queries under it."""
from __future__ import annotations

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
