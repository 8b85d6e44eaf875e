"""The llama-cpp-python version newrllama builds on, read from the one place it is written: the dependency
pin in pyproject.toml, which pip installs from. The shim's build, the llama.cpp build script, setup, the
benchmarks' reference tools and the tests read it here; stdlib only, loaded by path before anything is
installed.

    python capi_shim/llama_cpp_pin.py   # prints the version
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_PIN = re.compile(r'"llama-cpp-python==([0-9][0-9A-Za-z.+-]*)"')


def llama_cpp_python_version(pyproject: Path = PYPROJECT) -> str:
    found = _PIN.findall(pyproject.read_text(encoding="utf-8"))
    if len(found) != 1:
        raise RuntimeError(f"{pyproject} must pin llama-cpp-python exactly once as \"llama-cpp-python==X.Y.Z\"; "
                           f"found {len(found)} pins")
    return found[0]


if __name__ == "__main__":
    sys.stdout.write(llama_cpp_python_version() + "\n")
