"""What a context's numbers repeat with: the settings and the build that determine them bit for bit."""
from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import platform
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ...errors import DeterminismWarning
from .system import _features, built_library_dir, system_info, system_line

# ggml's tiled kernel for every row count: newrllama's build of llama.cpp takes it unless this says otherwise
# (capi_shim/llama_cpp_patch/tiled_forced_by_default.cpp); ggml reads it once, at the first matmul of the process.
TILED_MATMUL_SETTING = "GGML_CPU_TILED_MM_FORCE"


def _process_env(name: str) -> str:
    # The C environment, which is what ggml reads: os.environ is a copy made at start-up, which R's Sys.setenv()
    # and C code do not reach.
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    value = getenv(name.encode())
    return value.decode() if value else ""


def tiled_matmul_forced() -> str:
    """The tiled-kernel setting in force, as the build fingerprint gives it: the variable's value where it is set,
    else "1" on newrllama's build of llama.cpp (which forces it by default) and "" on another."""
    return _process_env(TILED_MATMUL_SETTING) or ("1" if "tiled-forced-by-default" in llama_cpp_patches() else "")


# Built into llama.cpp's CPU library by newrllama's patch (capi_shim/llama_cpp_patch), followed by its name.
PATCH_MARKER = re.compile(rb"newrllama-llama-cpp-patch: ([A-Za-z0-9_-]+)")


def _cpu_library() -> Optional[Path]:
    """The file of llama.cpp's CPU library: the one this process mapped (Linux), else the one beside the libllama
    the shim was built against."""
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text().splitlines():
            fields = line.split(maxsplit=5)  # address, perms, offset, device, inode, path
            if len(fields) == 6 and "ggml-cpu" in Path(fields[5]).name:
                return Path(fields[5])
    found = sorted(built_library_dir().glob("*ggml-cpu*"))
    return found[0] if found else None


@functools.lru_cache(maxsize=1)
def llama_cpp_patches() -> str:
    """The patches of newrllama that llama.cpp's CPU library was built with (attention over bf16 cells, the
    matmul of Q5_0 and Q8_0 weights): the bits differ with and without them. "none" for llama.cpp as vendored."""
    library = _cpu_library()
    if library is None:
        return "unknown (no llama.cpp CPU library found)"
    names = {m.group(1).decode() for m in PATCH_MARKER.finditer(library.read_bytes())}
    return ", ".join(sorted(names)) or "none"


@functools.lru_cache(maxsize=1)
def build_fingerprint() -> str:
    """llama-cpp-python's version, the backends built in, the CPU's architecture and the SIMD features llama.cpp
    uses here, the matmul setting and the patches of llama.cpp compiled in: what two machines must share to give
    the same bits."""
    line = system_line()
    used = sorted(name for name, value in _features(line).items() if value == "1")
    backends = ", ".join(["cpu", *system_info().gpu_backends])
    return (f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')} ({backends}); {platform.machine()} "
            f"{' '.join(used)}; {TILED_MATMUL_SETTING}={tiled_matmul_forced()}; "
            f"llama.cpp patch: {llama_cpp_patches()}")


@dataclass(frozen=True)
class Determinism:
    """A context's numbers are the same bits in every run with these settings on a machine of this build.
    batch_invariant: whether they also do not depend on the other prompts of a step (see Context); backend,
    n_gpu_layers and device: where the model's layers run ("cpu", 0 and the CPU, or a GPU backend, the layers
    offloaded (-1 all) and the devices, as system_info() names them)."""

    batch_invariant: bool
    n_threads: int
    n_batch: int
    n_seq_max: int
    build: str
    backend: str
    n_gpu_layers: int
    device: str

    def as_record(self) -> dict:
        return asdict(self)


def held_batch_invariance(asked: bool, backend: str, n_gpu_layers: int) -> bool:
    """Whether a context can keep batch invariance as asked: newrllama's batch-invariant kernels are CPU kernels,
    and the GPU backends' matmuls and attention pick tiles and splits by batch size. A warning says so."""
    if asked and n_gpu_layers != 0:
        layers = "every layer" if n_gpu_layers < 0 else f"{n_gpu_layers} layers"
        warnings.warn(DeterminismWarning(
            f"batch_invariant=True cannot be held: the model runs {layers} on {backend}, whose kernels are not "
            "batch-invariant, so a prompt's numbers may depend on the other prompts of its steps. Load the model "
            "with n_gpu_layers=0 for numbers that do not depend on the batch; the context records "
            "batch_invariant=False."), stacklevel=3)
        return False
    return asked
