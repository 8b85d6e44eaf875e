"""scripts/build_llama_cpp.py: the build arguments of each flavour, its wheel directory, and the install check."""
from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from helpers import repo_modules

ROOT = repo_modules.ROOT
SCRIPT = ROOT / "scripts" / "build_llama_cpp.py"
build = repo_modules.load("scripts/build_llama_cpp.py", "build_llama_cpp")

NO_AMX = ["-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
          "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"]


def test_each_flavour_has_its_backend_and_amx_stays_off_on_x86():
    assert build.cmake_args("none", "x86_64", "Linux", {}) == NO_AMX
    assert build.cmake_args("cuda", "x86_64", "Linux", {}) == NO_AMX + ["-DGGML_CUDA=on",
                                                                       "-DCMAKE_CUDA_ARCHITECTURES=75"]
    assert build.cmake_args("cuda", "x86_64", "Linux", {"NEWRLLAMA_CUDA_ARCH": "89"})[-1] == \
        "-DCMAKE_CUDA_ARCHITECTURES=89"
    assert build.cmake_args("vulkan", "aarch64", "Linux", {}) == ["-DGGML_VULKAN=on"]
    assert build.cmake_args("metal", "arm64", "Darwin", {}) == ["-DGGML_METAL=on"]
    with pytest.raises(ValueError, match="only on macOS"):
        build.cmake_args("metal", "x86_64", "Linux", {})
    with pytest.raises(ValueError, match="only on Linux"):
        build.cmake_args("cuda", "arm64", "Darwin", {})
    with pytest.raises(ValueError, match="one of"):
        build.cmake_args("rocm", "x86_64", "Linux", {})


@pytest.mark.parametrize("argv", [["--gpu", "none"], ["--gpu", "none", "--check"], ["--print-cmake-args"]])
def test_windows_is_refused_before_anything_is_built(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "platform", "win32")
    assert build.main(["--python", sys.executable, *argv]) == 2
    assert "Linux and macOS only; Windows is not supported" in capsys.readouterr().err


def test_cmake_args_reach_cmake_as_separate_arguments():
    # scikit-build-core splits CMAKE_ARGS as a shell does; flags with spaces must stay one argument.
    args = build.cmake_args("cuda", "x86_64", "Linux", {})
    assert shlex.split(build.cmake_args_text(args)) == args


AVX2 = ["-march=znver3", "-mavx2", "-mno-avx512f"]
AVX512 = ["-march=sapphirerapids", "-mavx2", "-mavx512f"]


def test_every_flavour_argument_set_and_cpu_has_its_own_wheel_directory(tmp_path):
    dirs = {build.wheel_dir(tmp_path, g, build.cmake_args(g, "x86_64", "Linux", {}), AVX2)
            for g in ("none", "cuda", "vulkan")}
    dirs.add(build.wheel_dir(tmp_path, "cuda", build.cmake_args("cuda", "x86_64", "Linux", {"NEWRLLAMA_CUDA_ARCH": "89"}),
                             AVX2))
    dirs.add(build.wheel_dir(tmp_path, "none", build.cmake_args("none", "x86_64", "Linux", {}), AVX512))
    assert len(dirs) == 5 and all(d.parent == tmp_path / "wheels" for d in dirs)
    assert build.cache_root({"NEWRLLAMA_CACHE_DIR": str(tmp_path)}) == tmp_path


def compiler_says(stderr: str, returncode: int = 0):
    def run(argv, **kwargs):
        assert argv[:2] == ["my-cc", "-march=native"]
        return subprocess.CompletedProcess(argv, returncode, "", stderr)
    return run


def test_the_native_target_is_what_the_compiler_makes_of_march_native():
    gcc = (" /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -E -quiet -v - -march=znver3 -mavx2 -mno-avx512f "
           "--param l1-cache-size=32 -mtune=znver3 -dumpbase -\n")
    assert build.native_target({"CC": "my-cc"}, compiler_says(gcc)) == AVX2
    clang = ' "/usr/bin/clang" -cc1 -E -target-cpu znver3 -target-feature +avx2 -target-feature -avx512f -x c -\n'
    assert build.native_target({"CC": "my-cc"}, compiler_says(clang)) == ["znver3", "+avx2", "-avx512f"]
    fallback = build.native_target({"CC": "my-cc"}, compiler_says("error: unknown -march", 1))
    assert fallback and fallback == build.native_target({"CC": "my-cc"}, compiler_says("", 1))
    assert build.native_target() == build.native_target()  # this machine: the same answer every time


def test_a_build_recorded_for_another_cpu_or_replaced_is_refused():
    installed = {"cpu_library_sha256": "ab", "build": {"wheel_dir": "cpu-111", "cpu_library_sha256": "ab"}}
    assert build.build_problems("cpu-111", installed) == []
    assert "built for another CPU" in build.build_problems("cpu-222", installed)[0]
    assert "reinstalled by other means" in build.build_problems("cpu-111", {**installed, "cpu_library_sha256": "cd"})[0]
    assert "no record" in build.build_problems("cpu-111", {**installed, "build": None})[0]


def test_the_check_tells_flavours_apart():
    cpu = {"version": repo_modules.llama_cpp_python_version(), "libraries": ["libggml-base.so", "libggml-cpu.so", "libllama.so"], "gpu_offload": False}
    vulkan = {**cpu, "libraries": cpu["libraries"] + ["libggml-vulkan.so"]}
    assert build.flavour_problems("none", cpu) == []
    assert build.flavour_problems("vulkan", vulkan) == []
    assert build.flavour_problems("vulkan", cpu) == ["the vulkan build lacks its backend library libggml-vulkan"]
    assert "must not have" in build.flavour_problems("none", vulkan)[0]
    assert "0.3.35 is installed" in build.flavour_problems("none", {**cpu, "version": "0.3.35"})[0]
    assert "not importable" in build.flavour_problems("none", {})[0]


def test_the_check_of_this_environment_names_its_flavour():
    def check(gpu):
        return subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable, "--gpu", gpu, "--check"],
                              capture_output=True, text=True)
    import newrllama
    built = newrllama.system_info().gpu_backends or ["none"]
    assert check(built[0]).returncode == 0, check(built[0]).stderr
    other = next(g for g in ("vulkan", "cuda") if g not in built)
    refused = check(other)
    assert refused.returncode == 1 and f"lacks its backend library libggml-{other}" in refused.stderr


def test_a_vulkan_build_that_cannot_work_is_refused_before_compiling(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for d, text in ((old, "#define VK_HEADER_VERSION 238\n"), (new, "#define VK_HEADER_VERSION 239\n")):
        (d / "vulkan").mkdir(parents=True)
        (d / "vulkan" / "vulkan_core.h").write_text(text)
    has_glslc = lambda name: "/usr/bin/glslc"  # noqa: E731
    assert build.vulkan_problems([new], which=has_glslc) == []
    assert "(1.3.238) are older than 1.3.239" in build.vulkan_problems([old], which=has_glslc)[0]
    assert build.vulkan_problems([new, old], which=has_glslc) == []  # the first headers found count
    assert build.vulkan_problems([old, new], which=has_glslc) != []
    assert "no Vulkan headers" in build.vulkan_problems([tmp_path / "none"], which=has_glslc)[0]
    assert "no glslc" in build.vulkan_problems([new], which=lambda name: None)[0]


def test_a_cuda_build_without_nvcc_or_cublas_is_refused_before_compiling(tmp_path):
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("")
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so.13").write_text("")
    assert "no nvcc" in build.cuda_problems({}, which=lambda name: None)[0]
    assert "has no cuBLAS" in build.cuda_problems({"CUDA_PATH": str(root)})[0]
    (root / "lib64" / "libcublas.so.13").write_text("")
    assert build.cuda_problems({"CUDA_PATH": str(root)}) == []
    assert build.cuda_problems({}, which=lambda name: str(root / "bin" / "nvcc")) == []
