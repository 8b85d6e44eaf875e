"""The shim's build on each platform: the library files it needs, how it links them, and the refusal of Windows.

Only Linux runs here; macOS and Windows are faked (a made-up llama-cpp-python folder, sys.platform).
"""
from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import repo_modules

ROOT = repo_modules.ROOT


build = repo_modules.load("capi_shim/build.py", "newrllama_shim_build")
platform_libs = build.platform_libs


def fake_llama_cpp(root: Path, suffix: str) -> tuple[Path, Path]:
    """An include and a lib folder as llama-cpp-python installs them, with libraries ending in `suffix`."""
    include, lib = root / "include", root / "llama_cpp" / "lib"
    include.mkdir(parents=True)
    lib.mkdir(parents=True)
    (include / "llama.h").write_text("")
    for name in ("llama", "ggml", "ggml-base"):
        (lib / f"lib{name}{suffix}").write_bytes(f"{name}{suffix}".encode())
    return include, lib


def test_each_platform_names_its_shared_libraries():
    assert platform_libs.shared_libraries("linux").file_name("ggml-base") == "libggml-base.so"
    assert platform_libs.shared_libraries("darwin").file_name("llama") == "libllama.dylib"


@pytest.mark.parametrize("platform", ["win32", "cygwin", "freebsd14"])
def test_other_platforms_are_refused_plainly(platform):
    with pytest.raises(platform_libs.UnsupportedPlatform, match="builds on Linux and macOS only") as refused:
        platform_libs.shared_libraries(platform)
    assert ("Windows is not supported" in str(refused.value)) == (platform != "freebsd14")


@pytest.mark.parametrize("platform, suffix", [("linux", ".so"), ("darwin", ".dylib")])
def test_the_shim_links_the_platforms_libraries_and_finds_them_by_rpath(tmp_path, platform, suffix):
    include, lib = fake_llama_cpp(tmp_path, suffix)
    libs = platform_libs.shared_libraries(platform)
    build.check_llama_cpp_files(include, lib, libs)
    settings = build.extension_settings(include, lib, libs)
    assert settings["library_dirs"] == [str(lib)]
    assert settings["libraries"] == ["llama", "ggml", "ggml-base", "m"]
    assert settings["extra_link_args"] == [f"-Wl,-rpath,{lib}"]
    macros = dict(settings["define_macros"])
    assert macros["NEWRLLAMA_BUILT_LIBRARY_DIR"] == f'"{lib}"'
    assert macros["NEWRLLAMA_BUILT_LIBRARY_SHA256"] == f'"{hashlib.sha256(f"llama{suffix}".encode()).hexdigest()}"'
    assert ("_DARWIN_C_SOURCE" in macros) == (platform == "darwin")
    # A changed header, llama.h or libllama rebuilds the shim.
    assert {str(build.HERE / "newrllama_internal.h"), str(include / "llama.h"),
            str(lib / f"libllama{suffix}")} <= set(settings["depends"])


def test_the_build_names_the_library_this_platform_lacks(tmp_path):
    include, lib = fake_llama_cpp(tmp_path, ".so")
    with pytest.raises(build.LlamaCppMissing, match=r"libllama\.dylib is missing"):
        build.check_llama_cpp_files(include, lib, platform_libs.shared_libraries("darwin"))
    (lib / "libggml-base.so").unlink()
    with pytest.raises(build.LlamaCppMissing, match=r"libggml-base\.so is missing"):
        build.check_llama_cpp_files(include, lib, platform_libs.shared_libraries("linux"))


def test_the_build_asks_the_platform_it_runs_on(monkeypatch):
    # This environment's llama-cpp-python holds Linux libraries only, so on a macOS the build misses its .dylib.
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(build.LlamaCppMissing, match=r"libllama\.dylib is missing"):
        build.make_ffibuilder()
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(platform_libs.UnsupportedPlatform, match="Windows is not supported"):
        build.make_ffibuilder()


def test_the_shim_compiles_without_c11_threads(tmp_path):
    # macOS's libc has no <threads.h>: a stand-in that refuses to be included shows the shim does without.
    (tmp_path / "threads.h").write_text('#error "the shim must not need C11 <threads.h>"\n')
    settings = build.extension_settings(*build.llama_cpp_location(), platform_libs.shared_libraries())
    macros = [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in settings["define_macros"]]
    includes = [f"-I{d}" for d in [tmp_path, *settings["include_dirs"]]]
    for source in build.SOURCES:
        run = subprocess.run([*shlex.split(sysconfig.get_config_var("CC")), "-fsyntax-only", *includes, *macros,
                              *settings["extra_compile_args"], str(build.HERE / source)],
                             capture_output=True, text=True)
        assert run.returncode == 0, f"{source}: {run.stderr}"
