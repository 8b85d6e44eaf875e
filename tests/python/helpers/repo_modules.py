"""The repository's scripts that are not part of the installed package (the shim's build, the llama.cpp build
script, its patches, the benchmarks), loaded by path as the build and setup load them."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def load(relative: str, name: str) -> ModuleType:
    """The module at ROOT/relative, registered as `name` (dataclasses of a module need it in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def llama_cpp_python_version() -> str:
    """The pinned llama-cpp-python version, from the one place it is written."""
    return load("capi_shim/llama_cpp_pin.py", "newrllama_llama_cpp_pin").llama_cpp_python_version()
