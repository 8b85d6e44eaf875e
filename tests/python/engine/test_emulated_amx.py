"""AMX tiles in software (scripts/emulated_amx/amx_on_sigill.c), which scripts/check_kernels_emulated.py builds into
its check of quant-gemm-amx on CPUs without AMX: each tile instruction that the CPU refuses is carried out by the
Intel SDM's definitions. tests/python/engine/c/emulated_amx_check.c runs each TDPB*D, TILEZERO and the loads and
stores through high base registers, a displacement and a RIP-relative configuration, and compares them with the
definitions computed in plain C; the process is granted the tiles it asks for. On a CPU with AMX, Linux grants them
and the hardware runs the same instructions, checked against the same definitions."""
from __future__ import annotations

import platform
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import repo_modules

CHECK = Path(__file__).resolve().parent / "c" / "emulated_amx_check.c"
EMULATION = repo_modules.ROOT / "scripts" / "emulated_amx" / "amx_on_sigill.c"

pytestmark = pytest.mark.skipif(not (sys.platform == "linux" and platform.machine() == "x86_64"),
                                reason="AMX tiles and their emulation are x86-64 Linux's")


def test_tile_instructions_follow_their_definitions(tmp_path: Path):
    binary = tmp_path / "emulated_amx_check"
    subprocess.run([*shlex.split(sysconfig.get_config_var("CC")), "-std=c11", "-O2", str(CHECK), str(EMULATION),
                    "-Wl,--wrap=syscall", "-o", str(binary)], check=True, capture_output=True, text=True)
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    lines = dict(line.split() for line in done.stdout.splitlines())
    assert lines == {name: "ok" for name in ("tdpbusd", "tdpbssd", "tdpbsud", "tdpbuud", "tilezero", "granted")}, \
        done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
