"""What the machine allows: read bandwidth and int8 multiply-add peak, measured with all threads at once.

machine_limits.c is compiled here for this CPU (-march=native, with cffi into a temporary folder) and each
measure runs one copy per thread concurrently (cffi lets go of the GIL during the C call); the figure is the
best of a few tries, as a peak is what the machine allows at its least disturbed.
"""
from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import cffi

from together import run_together

SOURCE = Path(__file__).with_name("machine_limits.c")
CDEF = """
uint64_t limits_read(const void *p, size_t n, int reps);
const char *limits_vector_unit(void);
int64_t limits_vector_macs(int64_t iters, int32_t *sink);
int64_t limits_amx_macs(int64_t iters, int32_t *sink);
"""
READ_BYTES = 1 << 30  # far beyond every cache level, as the weights of a model are
TRIES = 5


@dataclass(frozen=True)
class MachineLimits:
    threads: int
    read_gb_per_s: float           # bytes of a 1 GiB buffer read per second, every thread reading its share
    vector_unit: str
    vector_int8_gmacs: float       # int8 multiply-adds per second (1e9), every thread on the vector unit
    amx_int8_gmacs: Optional[float]  # the same with AMX tiles, None where the CPU or Linux gives none

    def as_dict(self) -> dict:
        return asdict(self)


def _compiled():
    """The compiled helper module, built afresh in a temporary folder (a few seconds)."""
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_machine_limits", SOURCE.read_text(), extra_compile_args=["-O2", "-march=native"])
    out = Path(tempfile.mkdtemp(prefix="machine-limits-"))
    library = ffi.compile(tmpdir=str(out), verbose=False)
    spec = importlib.util.spec_from_file_location("_machine_limits", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_gb_per_s(mod, threads: int) -> float:
    buf = mod.ffi.new("char[]", READ_BYTES + 64)
    base = int(mod.ffi.cast("uintptr_t", buf))
    aligned = mod.ffi.cast("uint8_t *", (base + 63) // 64 * 64)
    share = READ_BYTES // threads // 256 * 256
    for i in range(0, READ_BYTES, 4096):  # a page never written would be read from the one zero page
        aligned[i] = 1
    reps = 4
    best = 0.0
    for _ in range(TRIES):
        s = run_together(threads, lambda i: mod.lib.limits_read(aligned + i * share, share, reps))
        best = max(best, threads * share * reps / s / 1e9)
    return best


def _gmacs(fn, threads: int, iters: int, mod) -> Optional[float]:
    sinks = [mod.ffi.new("int32_t *") for _ in range(threads)]
    done = [0] * threads

    def one(i: int) -> None:
        done[i] = fn(iters, sinks[i])

    best = 0.0
    for _ in range(TRIES):
        s = run_together(threads, one)
        if min(done) < 0:
            return None
        best = max(best, sum(done) / s / 1e9)
    return best


def measure(threads: int) -> MachineLimits:
    mod = _compiled()
    return MachineLimits(
        threads=threads,
        read_gb_per_s=_read_gb_per_s(mod, threads),
        vector_unit=mod.ffi.string(mod.lib.limits_vector_unit()).decode(),
        vector_int8_gmacs=_gmacs(mod.lib.limits_vector_macs, threads, 20_000_000, mod),
        amx_int8_gmacs=_gmacs(mod.lib.limits_amx_macs, threads, 5_000_000, mod),
    )


if __name__ == "__main__":
    import sys

    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
