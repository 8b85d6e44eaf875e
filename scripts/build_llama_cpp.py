"""Builds and installs the pinned llama-cpp-python in one flavour (CPU, CUDA, Vulkan, Metal), and checks it.

pip's wheel cache keys a built wheel on name and version only, not on CMAKE_ARGS, so a
later build of another flavour would silently get the first one. Here every flavour is
built (with pip's cache off) into a wheel directory of its own, named by the flavour and
a digest of its build arguments, of newrllama's patches and of the CPU it is built for, and
installed only from there. The wheel is built from llama-cpp-python's source archive with
newrllama's patches of the llama.cpp it vendors applied (capi_shim/llama_cpp_patch: attention
over bf16 cells in blocks, the matmul of Q5_0 and Q8_0 weights with AVX512-VNNI). llama.cpp compiles its CPU kernels for the building machine
(-march=native), so a wheel built on an AVX-512 CPU dies with SIGILL on one without; a cache
or a virtual environment on a disk that several machines share must not hand it to another CPU.
The install is then checked: the flavour's backend library must be present and no other
GPU backend's, and the build recorded in the environment must be the one this CPU needs.

Used by scripts/setup.sh and by the R package's install_newrllama(); stdlib only, since it
runs before anything is installed.

    python scripts/build_llama_cpp.py --python .venv/bin/python [--gpu none|cuda|vulkan|metal]
    python scripts/build_llama_cpp.py --python .venv/bin/python --check   # exit 0 if the flavour is installed
    python scripts/build_llama_cpp.py --gpu cuda --print-cmake-args
    python scripts/build_llama_cpp.py --gpu cuda --keep-build /tmp/llama-build   # source and objects kept
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, List

FLAVOURS = ("none", "cuda", "vulkan", "metal")
# One architecture keeps a CUDA build to minutes; 75 (Turing: T4 and later, through PTX) unless overridden.
DEFAULT_CUDA_ARCH = "75"
# AMX kernels of llama.cpp crash at the first decode on CPUs that report AMX where the kernel refuses
# AMX tile state (see README); harmless elsewhere.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BACKEND_LIBRARY = {"cuda": "ggml-cuda", "vulkan": "ggml-vulkan", "metal": "ggml-metal"}
# Written into the interpreter's sys.prefix after an install: which wheel directory it came from,
# and a digest of its CPU library, so that a later reinstall by other means is noticed too.
BUILD_RECORD = "newrllama-llama-cpp-build.json"


def _load_capi_shim_module(name: str, relative: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "capi_shim" / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The shim's build knows which platforms newrllama builds on; a ten-minute llama.cpp build for one
# the shim cannot be built on would be wasted.
platform_libs = _load_capi_shim_module("newrllama_platform_libs", "platform_libs.py")
# newrllama's patches of the vendored llama.cpp (capi_shim/llama_cpp_patch/apply.py), applied before the build.
llama_cpp_patch = _load_capi_shim_module("newrllama_llama_cpp_patch", "llama_cpp_patch/apply.py")
LLAMA_CPP_PYTHON = ("llama-cpp-python=="
                    + _load_capi_shim_module("newrllama_llama_cpp_pin", "llama_cpp_pin.py").llama_cpp_python_version())


def cmake_args(gpu: str, machine: str = platform.machine(), system: str = platform.system(),
               env: Dict[str, str] = os.environ) -> List[str]:
    """The CMAKE_ARGS of a flavour, as a list of arguments."""
    if gpu not in FLAVOURS:
        raise ValueError(f"gpu must be one of {', '.join(FLAVOURS)}, got {gpu!r}")
    if gpu == "metal" and system != "Darwin":
        raise ValueError("the metal flavour builds only on macOS")
    if gpu == "cuda" and system != "Linux":
        raise ValueError("the cuda flavour builds only on Linux")
    args = []
    if machine.lower() in ("x86_64", "amd64"):
        args += [f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"]
    if gpu == "cuda":
        args += ["-DGGML_CUDA=on", f"-DCMAKE_CUDA_ARCHITECTURES={env.get('NEWRLLAMA_CUDA_ARCH') or DEFAULT_CUDA_ARCH}"]
    elif gpu == "vulkan":
        args += ["-DGGML_VULKAN=on"]
    elif gpu == "metal":
        args += ["-DGGML_METAL=on"]
    return args


# Debian 12's libvulkan-dev; older headers lack what llama.cpp's Vulkan backend uses beyond the instance's layer
# settings, which capi_shim/llama_cpp_patch leaves out where the headers lack them.
OLDEST_VULKAN_HEADERS = 239


def vulkan_problems(include_dirs: List[Path], which=shutil.which) -> List[str]:
    """What the Vulkan build lacks here, found before the build starts rather than when the compile reaches Vulkan."""
    problems = []
    header = next((d / "vulkan" / "vulkan_core.h" for d in include_dirs if (d / "vulkan" / "vulkan_core.h").exists()),
                  None)
    if header is None:
        problems.append("no Vulkan headers (vulkan/vulkan_core.h); on Debian: apt install libvulkan-dev")
    else:
        version = re.search(r"#define VK_HEADER_VERSION (\d+)", header.read_text(errors="replace"))
        if version is None or int(version.group(1)) < OLDEST_VULKAN_HEADERS:
            problems.append(f"the Vulkan headers at {header.parent} (1.3.{version.group(1) if version else '?'}) are "
                            f"older than 1.3.{OLDEST_VULKAN_HEADERS} (Debian 12's), the oldest llama.cpp's Vulkan "
                            "backend has been built with here: install newer headers (the LunarG SDK, or a newer "
                            "distribution) and set VULKAN_SDK")
    if which("glslc") is None:
        problems.append("no glslc shader compiler; on Debian: apt install glslc")
    return problems


def cuda_problems(env: Dict[str, str] = os.environ, which=shutil.which) -> List[str]:
    """What the CUDA build lacks here: nvcc, and cuBLAS, which llama.cpp's CUDA backend links."""
    root = Path(env["CUDA_PATH"]) if env.get("CUDA_PATH") else None
    if root is None:
        nvcc = which("nvcc")
        if nvcc is None:
            return ["no nvcc (the CUDA toolkit): install it, or set CUDA_PATH to where it is"]
        root = Path(nvcc).resolve().parent.parent
        if not (root / "lib64").exists() and Path("/usr/local/cuda/bin/nvcc").exists():
            root = Path("/usr/local/cuda")  # nvcc on the PATH may be a wrapper script elsewhere
    libs = [root / "lib64", root / "targets" / f"{platform.machine()}-linux" / "lib", root / "lib"]
    if not any(d.is_dir() and any(d.glob("libcublas.so*")) for d in libs):
        return [f"the CUDA toolkit at {root} has no cuBLAS (libcublas), which llama.cpp's CUDA backend links: "
                "install the toolkit's libraries (e.g. cuda-libraries-dev), or set CUDA_PATH to a full toolkit"]
    return []


def vulkan_include_dirs(env: Dict[str, str] = os.environ) -> List[Path]:
    sdk = [Path(env["VULKAN_SDK"]) / "include"] if env.get("VULKAN_SDK") else []
    return sdk + [Path("/usr/local/include"), Path("/usr/include")]


def cmake_args_text(args: List[str]) -> str:
    # scikit-build-core splits CMAKE_ARGS like a shell does.
    return " ".join(shlex.quote(a) for a in args)


def native_target(env: Dict[str, str] = os.environ, run=subprocess.run) -> List[str]:
    """The instruction sets a -march=native build uses here, as this machine's C compiler spells them
    (gcc: -march=znver3 -mavx2 -mno-avx512f ...; clang: its target cpu and features); without a
    compiler that answers, the CPU flags the kernel reports."""
    try:
        out = run([env.get("CC") or "cc", "-march=native", "-E", "-v", "-"], input="", capture_output=True,
                  text=True, timeout=60)
        words = out.stderr.split() if out.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        words = []
    isa = [w for w in words if w.startswith("-m") and not w.startswith("-mtune")]
    isa += [b for a, b in zip(words, words[1:]) if a in ("-target-cpu", "-target-feature")]
    if isa:
        return isa
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        return sorted(flags.split(":", 1)[1].split())
    except (OSError, StopIteration):
        return [platform.machine(), platform.processor()]


def wheel_dir(cache: Path, gpu: str, args: List[str], target: List[str]) -> Path:
    """The wheel directory of a flavour built with these arguments for this native target."""
    digest = hashlib.sha256("\n".join([LLAMA_CPP_PYTHON, f"patch {llama_cpp_patch.digest()}", *args, "--",
                                         *target]).encode()).hexdigest()[:12]
    return cache / "wheels" / f"{'cpu' if gpu == 'none' else gpu}-{digest}"


def cache_root(env: Dict[str, str] = os.environ) -> Path:
    explicit = env.get("NEWRLLAMA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "newrllama"


INSPECT = r"""
import hashlib, json, os, sys
try:
    import importlib.metadata as m
    version = m.version("llama-cpp-python")
except Exception:
    print(json.dumps(None)); sys.exit(0)
import llama_cpp
lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
names = sorted(os.listdir(lib)) if os.path.isdir(lib) else []
cpu = [n for n in names if n.startswith("libggml-cpu.") and not os.path.islink(os.path.join(lib, n))]
digest = hashlib.sha256(open(os.path.join(lib, cpu[0]), "rb").read()).hexdigest() if cpu else None
record = os.path.join(sys.prefix, %r)
build = json.load(open(record)) if os.path.exists(record) else None
print(json.dumps({"version": version, "libraries": names, "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
                  "cpu_library_sha256": digest, "build": build, "prefix": sys.prefix}))
""" % BUILD_RECORD


def inspect(python: str) -> dict:
    """What the interpreter has installed: version, backend libraries, whether offload works, the digest
    of its CPU library and the build record (or None)."""
    out = subprocess.run([python, "-c", INSPECT], capture_output=True, text=True, env=_clean_env())
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "import failed"}
    return json.loads(out.stdout) or {}


def build_problems(wheels: str, installed: dict) -> List[str]:
    """Why the installed build may not be the one made for this CPU from wheel directory `wheels`."""
    build = installed.get("build")
    if not build:
        return ["the environment has no record of which build of llama-cpp-python it holds (installed by other "
                "means, or by an older setup)"]
    if build.get("wheel_dir") != wheels:
        return [f"the installed llama-cpp-python was built for another CPU or with other arguments "
                f"({build.get('wheel_dir')}; this machine needs {wheels})"]
    if build.get("cpu_library_sha256") != installed.get("cpu_library_sha256"):
        return ["llama-cpp-python was reinstalled by other means after its build was recorded"]
    return []


def flavour_problems(gpu: str, installed: dict) -> List[str]:
    """Why the installed llama-cpp-python is not the flavour asked for (empty: it is)."""
    if not installed or "error" in installed:
        return [f"llama-cpp-python is not importable ({installed.get('error', 'not installed')})"]
    problems = []
    want = LLAMA_CPP_PYTHON.split("==")[1]
    if installed["version"] != want:
        problems.append(f"llama-cpp-python {installed['version']} is installed, not {want}")
    libs = " ".join(installed["libraries"])
    for flavour, library in BACKEND_LIBRARY.items():
        if flavour == gpu and library not in libs:
            problems.append(f"the {gpu} build lacks its backend library lib{library}")
        if flavour != gpu and library in libs:
            problems.append(f"the installed build has lib{library}, which the {gpu} flavour must not have")
    return problems


def _clean_env() -> Dict[str, str]:
    # A caller such as R may put its own library directories (and another libpython) first.
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    return env


def _pip(python: str, *args: str, env: Dict[str, str]) -> None:
    subprocess.run([python, "-m", "pip", *args], check=True, env=env)


def record_build(installed: dict, target: Path) -> None:
    record = {"wheel_dir": target.name, "cpu_library_sha256": installed["cpu_library_sha256"]}
    (Path(installed["prefix"]) / BUILD_RECORD).write_text(json.dumps(record) + "\n")


def downloaded_source(python: str, into: Path, env: Dict[str, str], requirement: str = LLAMA_CPP_PYTHON) -> Path:
    """llama-cpp-python's source archive, extracted under `into`; returns the source's root."""
    _pip(python, "download", "-q", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python", "-d", str(into),
         requirement, env=env)
    archive = next(into.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # a Python without extraction filters (before 3.11.4): the archive is PyPI's own
            tar.extractall(into)
    return into / archive.name[:-len(".tar.gz")]


def patched_source(python: str, into: Path, env: Dict[str, str]) -> Path:
    """The pinned source archive, extracted under `into`, with newrllama's patches applied to the llama.cpp it
    vendors; returns the source's root."""
    root = downloaded_source(python, into, env)
    llama_cpp_patch.apply(root / "vendor" / "llama.cpp")
    return root


def build_wheel(python: str, args: List[str], target: Path, workdir: Path, keep: bool) -> None:
    env = _clean_env()
    source = patched_source(python, workdir, env)
    build_env = {**env, "CMAKE_ARGS": cmake_args_text(args)}
    if keep:
        # scikit-build-core builds in this folder rather than a temporary one, so that llama.cpp's own tools
        # can be built later from the same objects (a reference built apart would compile the backend again).
        build_env["SKBUILD_BUILD_DIR"] = str(workdir / "build")
    _pip(python, "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(target), str(source), env=build_env)


def build_and_install(python: str, gpu: str, args: List[str], target: Path, keep_build: Path = None) -> None:
    env = _clean_env()
    if not any(target.glob("llama_cpp_python-*.whl")):
        target.mkdir(parents=True, exist_ok=True)
        print(f"[build] building {LLAMA_CPP_PYTHON} ({gpu}, llama.cpp patch {llama_cpp_patch.NAME}) into {target}; "
              f"CMAKE_ARGS={cmake_args_text(args)}", file=sys.stderr, flush=True)
        if keep_build is not None:
            keep_build.mkdir(parents=True, exist_ok=True)
            build_wheel(python, args, target, keep_build, keep=True)
        else:
            with tempfile.TemporaryDirectory(prefix="newrllama-llama-cpp-") as tmp:
                build_wheel(python, args, target, Path(tmp), keep=False)
    _pip(python, "uninstall", "-q", "-y", "llama-cpp-python", env=env)
    _pip(python, "install", "-q", "--no-cache-dir", "--only-binary", "llama-cpp-python", "--find-links", str(target),
         LLAMA_CPP_PYTHON, env=env)


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", default=os.environ.get("NEWRLLAMA_GPU") or "none", choices=FLAVOURS)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to install into")
    parser.add_argument("--check", action="store_true", help="only check the installed flavour")
    parser.add_argument("--print-cmake-args", action="store_true")
    parser.add_argument("--keep-build", type=Path, default=None, metavar="DIR",
                        help="keep the patched source (DIR/llama_cpp_python-*) and CMake's build folder (DIR/build) "
                             "of a new build, for building llama.cpp's own tools from the same objects")
    args = parser.parse_args(argv)
    try:
        platform_libs.shared_libraries()
        flags = cmake_args(args.gpu)
    except (ValueError, platform_libs.UnsupportedPlatform) as exc:
        print(f"build_llama_cpp: {exc}", file=sys.stderr)
        return 2
    if args.print_cmake_args:
        print(cmake_args_text(flags))
        return 0
    target = wheel_dir(cache_root(), args.gpu, flags, native_target())

    def problems_of(installed: dict) -> List[str]:
        problems = flavour_problems(args.gpu, installed)
        return problems or build_problems(target.name, installed)

    if args.check:
        problems = problems_of(inspect(args.python))
        for p in problems:
            print(f"build_llama_cpp: {p}", file=sys.stderr)
        return 1 if problems else 0
    if not problems_of(inspect(args.python)):
        return 0
    missing = {"vulkan": lambda: vulkan_problems(vulkan_include_dirs()), "cuda": cuda_problems}.get(
        args.gpu, lambda: [])()
    if missing:
        print(f"build_llama_cpp: cannot build the {args.gpu} flavour: " + "; ".join(missing), file=sys.stderr)
        return 1
    build_and_install(args.python, args.gpu, flags, target, args.keep_build)
    installed = inspect(args.python)
    problems = flavour_problems(args.gpu, installed)
    if problems:
        print("build_llama_cpp: the install is not the flavour asked for: " + "; ".join(problems), file=sys.stderr)
        return 1
    record_build(installed, target)
    if args.gpu != "none" and not installed["gpu_offload"]:
        print(f"build_llama_cpp: the {args.gpu} build is installed, but llama.cpp finds no {args.gpu} device here "
              "(llama_supports_gpu_offload() is false): models will run on the CPU"
              + ("; llama.cpp passes by Vulkan devices of CPU type (lavapipe) unless GGML_VK_VISIBLE_DEVICES names "
                 "one" if args.gpu == "vulkan" else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
