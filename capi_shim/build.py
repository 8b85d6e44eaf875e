"""Builds newrllama._capi: the C shim compiled with cffi (API mode, out of line).

It compiles against the llama.h that the pinned llama-cpp-python installed into
this environment and links that package's libllama (libllama.so on Linux,
libllama.dylib on macOS: platform_libs.py) with an rpath, so nothing has to be put
on LD_LIBRARY_PATH. Run by setuptools through ``cffi_modules``.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
SOURCES = ["newrllama_errors.c", "newrllama_model.c", "newrllama_context.c", "newrllama_step.c",
           "newrllama_sampler.c", "newrllama_logits_row.c", "newrllama_grammar.c", "newrllama_engine.c",
           "newrllama_generate.c", "newrllama_system.c"]
LINKED_LIBRARIES = ["llama", "ggml", "ggml-base"]  # ggml for the device registry (system info)

# Facts of this build that the module checks again at import.
BUILD_INFO_C = """
static const char *newrllama_built_llama_cpp_version(void) { return NEWRLLAMA_BUILT_LLAMA_CPP_VERSION; }
static const char *newrllama_built_library_dir(void) { return NEWRLLAMA_BUILT_LIBRARY_DIR; }
static const char *newrllama_built_library_sha256(void) { return NEWRLLAMA_BUILT_LIBRARY_SHA256; }
"""
BUILD_INFO_CDEF = """
static const char *newrllama_built_llama_cpp_version(void);
static const char *newrllama_built_library_dir(void);
static const char *newrllama_built_library_sha256(void);
"""


class LlamaCppMissing(RuntimeError):
    pass


def _load_sibling(name: str, file_name: str):
    # cffi runs this file by path, so its folder is not on sys.path.
    spec = importlib.util.spec_from_file_location(name, HERE / file_name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


platform_libs = _load_sibling("newrllama_platform_libs", "platform_libs.py")
LLAMA_CPP_PYTHON_VERSION = _load_sibling("newrllama_llama_cpp_pin", "llama_cpp_pin.py").llama_cpp_python_version()


def llama_cpp_location() -> tuple[Path, Path]:
    """Returns (include dir with llama.h, lib dir with libllama) of the installed llama-cpp-python."""
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        raise LlamaCppMissing(f"llama-cpp-python is not installed. {_hint()}") from None
    if version != LLAMA_CPP_PYTHON_VERSION:
        raise LlamaCppMissing(f"llama-cpp-python {version} is installed, but {LLAMA_CPP_PYTHON_VERSION} is required. "
                              f"{_hint()}")
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise LlamaCppMissing(f"the llama_cpp package cannot be found. {_hint()}")
    package_dir = Path(spec.origin).resolve().parent
    include_dir, lib_dir = package_dir.parent / "include", package_dir / "lib"
    check_llama_cpp_files(include_dir, lib_dir, platform_libs.shared_libraries())
    return include_dir, lib_dir


def check_llama_cpp_files(include_dir: Path, lib_dir: Path, libs: platform_libs.SharedLibraries) -> None:
    for needed in [include_dir / "llama.h", *(lib_dir / libs.file_name(name) for name in LINKED_LIBRARIES)]:
        if not needed.exists():
            raise LlamaCppMissing(f"{needed} is missing from the llama-cpp-python install. {_hint()}")


def _hint() -> str:
    return (f"newrllama builds against llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}, installed first into "
            f"the same environment ({sys.executable}) with AMX disabled; run scripts/setup.sh, or see the README")


def cdef_from_header(header: Path) -> str:
    """The cdef is the public header itself, less what cffi's parser does not take."""
    text = header.read_text()
    text = re.sub(r'#ifdef __cplusplus.*?#endif', "", text, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return text.replace("NEWRLLAMA_API ", "")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extension_settings(include_dir: Path, lib_dir: Path, libs: platform_libs.SharedLibraries) -> dict:
    """How the shim is compiled and linked against the llama.cpp libraries in lib_dir."""
    library = (lib_dir / libs.file_name("llama")).resolve()
    return dict(
        include_dirs=[str(HERE), str(include_dir)],
        library_dirs=[str(lib_dir)],
        libraries=[*LINKED_LIBRARIES, "m"],
        define_macros=[
            ("_POSIX_C_SOURCE", "200809L"),
            *libs.feature_macros,
            ("NEWRLLAMA_BUILT_LLAMA_CPP_VERSION", f'"{LLAMA_CPP_PYTHON_VERSION}"'),
            ("NEWRLLAMA_BUILT_LIBRARY_DIR", f'"{lib_dir.resolve()}"'),
            ("NEWRLLAMA_BUILT_LIBRARY_SHA256", f'"{sha256_of(library)}"'),
        ],
        extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        # An absolute rpath, the same on Linux and macOS: the shim belongs to this environment's libllama
        # (the import checks its folder and digest), and an in-place build sits in the checkout, from
        # where no $ORIGIN- or @loader_path-relative path leads to site-packages.
        extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
        # setuptools rebuilds only what is older than one of these: the shim's headers and llama.h count
        # too, and so does libllama, whose digest is compiled in (a reinstalled one would fail the import).
        depends=[str(p) for p in sorted(HERE.glob("*.h"))] + [str(include_dir / "llama.h"), str(library)],
    )


def make_ffibuilder() -> FFI:
    libs = platform_libs.shared_libraries()
    include_dir, lib_dir = llama_cpp_location()
    ffibuilder = FFI()
    ffibuilder.cdef(cdef_from_header(HERE / "newrllama_capi.h") + BUILD_INFO_CDEF)
    ffibuilder.set_source(
        "newrllama._capi",
        '#include "newrllama_capi.h"\n' + BUILD_INFO_C,
        sources=[os.path.relpath(HERE / name) for name in SOURCES],  # setuptools refuses absolute paths
        **extension_settings(include_dir, lib_dir, libs),
    )
    return ffibuilder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
