"""What a context's numbers repeat with: the settings and the build that determine them bit for bit."""
from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import platform
from dataclasses import asdict, dataclass

from .._lib import ffi, lib
from .system import _features

# Set by the C shim before the first matmul (newrllama_model.c); a value the user set is kept.
TILED_MATMUL_SETTING = "GGML_CPU_TILED_MM_FORCE"


def _process_env(name: str) -> str:
    # The C shim sets it in the C environment, which os.environ (a copy made at start-up) does not see.
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    value = getenv(name.encode())
    return value.decode() if value else ""


@functools.lru_cache(maxsize=1)
def build_fingerprint() -> str:
    """llama-cpp-python's version, the CPU's architecture and the SIMD features llama.cpp uses here, and the
    matmul setting: what two machines must share to give the same bits."""
    line = ffi.string(lib.newrllama_system_info()).decode("utf-8", "replace")
    used = sorted(name for name, value in _features(line).items() if value == "1")
    return (f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}; {platform.machine()} "
            f"{' '.join(used)}; {TILED_MATMUL_SETTING}={_process_env(TILED_MATMUL_SETTING)}")


@dataclass(frozen=True)
class Determinism:
    """A context's numbers are the same bits in every run with these settings on a machine of this build.
    batch_invariant: whether they also do not depend on the other prompts of a step (see Context)."""

    batch_invariant: bool
    n_threads: int
    n_batch: int
    n_seq_max: int
    build: str

    def as_record(self) -> dict:
        return asdict(self)
