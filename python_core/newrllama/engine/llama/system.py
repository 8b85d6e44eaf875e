"""system_info(): what this build of llama.cpp can run on."""
from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Dict, List

from ... import _lib
from ..._lib import ffi, lib

_KINDS = {lib.NEWRLLAMA_DEVICE_CPU: "cpu", lib.NEWRLLAMA_DEVICE_GPU: "gpu", lib.NEWRLLAMA_DEVICE_IGPU: "igpu",
          lib.NEWRLLAMA_DEVICE_ACCEL: "accel"}
# GPU backends are separate libraries beside libllama; which of them are present says what the build is.
_GPU_BACKEND_LIBRARIES = {"cuda": "libggml-cuda", "vulkan": "libggml-vulkan", "metal": "libggml-metal"}


@dataclass(frozen=True)
class Device:
    """A device llama.cpp can compute on (ggml's backend device registry), as `system_info()` lists it."""
    name: str
    description: str
    backend: str
    kind: str  # 'cpu', 'gpu', 'igpu', 'accel' or 'other'
    memory_total: int  # bytes
    memory_free: int


@dataclass(frozen=True)
class SystemInfo:
    """The llama-cpp-python build newrllama runs on and what it finds on this machine."""

    llama_cpp_python: str
    library_dir: str
    gpu_backends: List[str]  # GPU backends this build has: 'cuda', 'vulkan', 'metal' (empty: a CPU build)
    gpu_offload: bool  # whether llama.cpp can offload layers here (a GPU backend and a device for it)
    devices: List[Device]
    cpu_features: Dict[str, str]  # llama.cpp's system line: 'AVX2' -> '1', ...


def system_info() -> SystemInfo:
    """What this installation can run on: the llama-cpp-python build and its library folder, the GPU backends
    built into it, whether llama.cpp can offload layers here, the devices, and the CPU features it uses."""
    library_dir = os.path.dirname(ffi.string(lib.newrllama_llama_library_path()).decode())
    present = " ".join(os.listdir(library_dir)) if os.path.isdir(library_dir) else ""
    return SystemInfo(
        llama_cpp_python=importlib.metadata.version("llama-cpp-python"),
        library_dir=library_dir,
        gpu_backends=[name for name, library in _GPU_BACKEND_LIBRARIES.items() if library in present],
        gpu_offload=bool(lib.newrllama_supports_gpu_offload()),
        devices=[_device(i) for i in range(lib.newrllama_device_count())],
        cpu_features=_features(system_line()),
    )


def system_line() -> str:
    """llama.cpp's system line: the CPU features it uses, 'AVX2 = 1 | ...'."""
    return ffi.string(lib.newrllama_system_info()).decode("utf-8", "replace")


def built_library_dir() -> Path:
    """The folder of the libllama the shim was built against."""
    return Path(ffi.string(lib.newrllama_built_library_dir()).decode())


def _device(index: int) -> Device:
    info = ffi.new("newrllama_device_info *")
    err = _lib.new_error_slot()
    _lib.check(lib.newrllama_device_get(index, info, err), err)
    text = lambda p: ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""  # noqa: E731
    return Device(text(info.name), text(info.description), text(info.backend), _KINDS.get(info.kind, "other"),
                  int(info.memory_total), int(info.memory_free))


def _features(line: str) -> Dict[str, str]:
    """'CPU : SSE3 = 1 | AVX2 = 1 | ...' as {'SSE3': '1', 'AVX2': '1', ...}."""
    return {m.group(1): m.group(2) for m in re.finditer(r"([A-Za-z0-9_]+)\s*=\s*([^|\s]+)", line)}
