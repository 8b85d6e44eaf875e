"""Loads the compiled shim, checks it against the libllama it loaded, and turns C errors into exceptions."""
from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import os
import sys
from typing import Dict, NoReturn, Optional, Type

from . import errors


def _load_cxx_runtime_globally() -> None:
    """libllama's calls into the C++ runtime must bind to libstdc++ itself. A CUDA build's libggml-cuda exports weak
    copies of libstdc++'s stream and locale code, and with the shim (a C library) loading libllama, those copies won:
    every model load crashed in llama_model::print_info (CUDA 13.0, H200, bench/results/gpu). With libstdc++ in the
    process's global scope before the shim loads, lookups find it first, as they do under LD_PRELOAD."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
        except OSError:  # a llama.cpp built against another C++ runtime (libc++) brings its own
            pass


_load_cxx_runtime_globally()
try:
    from ._capi import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on the install
    raise errors.LibraryMismatchError(
        "newrllama's C shim (newrllama._capi) is not built or cannot load its libllama: "
        f"{exc}. Reinstall with scripts/setup.sh (or install_newrllama() from R)."
    ) from exc


def library_problem(installed_version: str, built_version: str, loaded_path: str, built_dir: str,
                    loaded_sha256: str, built_sha256: str) -> Optional[str]:
    """Why the loaded libllama is not the one the shim was built against, or None."""
    if installed_version != built_version:
        return f"llama-cpp-python {installed_version} is installed but the shim was built against {built_version}"
    if os.path.dirname(loaded_path) != built_dir:
        return f"the shim loaded {loaded_path} but was built against the libllama in {built_dir}"
    if loaded_sha256 != built_sha256:
        return f"{loaded_path} changed since the shim was built"
    return None


def _check_loaded_library() -> None:
    try:
        installed = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        installed = "none"
    loaded = os.path.realpath(ffi.string(lib.newrllama_llama_library_path()).decode())
    with open(loaded, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    problem = library_problem(installed, ffi.string(lib.newrllama_built_llama_cpp_version()).decode(), loaded,
                              os.path.realpath(ffi.string(lib.newrllama_built_library_dir()).decode()), digest,
                              ffi.string(lib.newrllama_built_library_sha256()).decode())
    if problem:
        raise errors.LibraryMismatchError(problem + "; rebuild newrllama (scripts/setup.sh)")


_check_loaded_library()
lib.newrllama_backend_init(ffi.NULL)
lib.newrllama_set_log_level(int(os.environ.get("NEWRLLAMA_LOG_LEVEL", "1")))

_ERROR_CLASSES: Dict[int, Type[errors.NewrllamaError]] = {
    lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT: errors.InvalidArgumentError,
    lib.NEWRLLAMA_ERROR_MODEL_LOAD: errors.ModelLoadError,
    lib.NEWRLLAMA_ERROR_CONTEXT_CREATE: errors.ContextError,
    lib.NEWRLLAMA_ERROR_TOKENIZE: errors.TokenizeError,
    lib.NEWRLLAMA_ERROR_TEMPLATE: errors.TemplateError,
}


def raise_for(code: int, message_ptr) -> NoReturn:
    """Raises the package's exception for a C error code and its message."""
    message = ffi.string(message_ptr[0]).decode("utf-8", "replace") if message_ptr[0] != ffi.NULL else "unknown error"
    if code == lib.NEWRLLAMA_ERROR_OUT_OF_MEMORY:
        raise MemoryError(message)
    raise _ERROR_CLASSES.get(code, errors.GenerationError)(message)


def check(code: int, message_ptr) -> None:
    if code != lib.NEWRLLAMA_OK:
        raise_for(code, message_ptr)


def new_error_slot():
    return ffi.new("const char **")


def take_string(ptr) -> bytes:
    """Copies a C string that the caller owns and frees it."""
    try:
        return ffi.string(ptr)
    finally:
        lib.newrllama_free_string(ptr)
