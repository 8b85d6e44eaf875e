"""capi_shim/llama_cpp_patch: newrllama's patches of the vendored llama.cpp go in where their anchors are, refuse a
source they were not written for or one patched already, and name the patches their wheel is built with."""
from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import repo_modules

ROOT = repo_modules.ROOT
patch = repo_modules.load("capi_shim/llama_cpp_patch/apply.py", "llama_cpp_patch")
upgrade = repo_modules.load("scripts/try_llama_cpp_upgrade.py", "try_llama_cpp_upgrade")

# The places of ggml's CPU sources the patches edit, as in the llama.cpp that the pinned llama-cpp-python vendors.
OPS = ("#include \"ops.h\"\n#include <algorithm>\n#include <cfloat>\n\nstatic void other(void) {}\n\n"
       + patch.FLASH_ATTN_BF16_BLOCKED.kernel_anchor
       + "        const ggml_compute_params * params,\n        ggml_tensor * dst) {\n"
       + patch.FLASH_ATTN_BF16_BLOCKED.edits[1].old
       + "\n                one_by_one(params, dst, ir0, ir1, 0, nek1, nullptr, 0);\n            }\n}\n")
# ggml's counter barrier, as it builds without OpenMP, and libgomp's where it builds with it.
BARRIER = (patch.FUTEX_BARRIER.kernel_anchor + "    int n_threads = tp->n_threads;\n    if (n_threads == 1) {\n"
           + "        return;\n    }\n\n" + patch.FUTEX_BARRIER.edits[0].old + "\n"
           + "    int n_barrier = atomic_fetch_add_explicit(&tp->n_barrier, 1, memory_order_seq_cst);\n"
           + "    if (n_barrier == (n_threads - 1)) {\n"
           + "        atomic_store_explicit(&tp->n_barrier, 0, memory_order_relaxed);\n"
           + patch.FUTEX_BARRIER.edits[1].old + "    }\n\n" + patch.FUTEX_BARRIER.edits[2].old + "\n"
           + "    atomic_thread_fence(memory_order_seq_cst);\n#endif\n}\n")
CPU = ("#include \"ggml-cpu-impl.h\"\n\nstatic void other(void) {}\n\n" + patch.Q0_GEMM_VNNI.kernel_anchor
       + "        const struct ggml_compute_params * params,\n              struct ggml_tensor * dst) {\n"
       + patch.QUANT_GEMM_AVX2.edits[0].old + "        return;\n    }\n    convert(params);\n"
       + "    ggml_barrier(params->threadpool);\n\n#if GGML_USE_LLAMAFILE\n    if (src1->type != vec_dot_type) {\n"
       + "        const void* wdata = params->wdata;\n"
       + "        llamafile_sgemm(params);\n    }\n#endif\n}\n\n" + BARRIER)
QUANTS = ("#include \"ggml-common.h\"\n\nstatic void other(void) {}\n\n" + patch.QUANTIZE_Q8_K_AVX2.kernel_anchor
          + patch.QUANTIZE_Q8_K_AVX2.edits[0].old + "\n")
BASE = ("#include \"ggml-impl.h\"\n\nstatic void other(void) {}\n\n" + patch.HUGE_PAGES.kernel_anchor
        + "    void * aligned_memory = NULL;\n  #if defined(__APPLE__)\n    int result = vm_allocate();\n  #else\n"
        + patch.HUGE_PAGES.edits[0].old + "\n    return aligned_memory;\n}\n")
TILED = ("#include \"tiled.h\"\n\nstatic void other(void) {}\n\n" + patch.TILED_FORCED_BY_DEFAULT.kernel_anchor
         + "static bool ggml_tiled_matmul_forced(void) {\n    static bool forced = false;\n"
         + "    std::call_once(flag, []() {\n        const char * env = getenv(\"GGML_CPU_TILED_MM_FORCE\");\n"
         + patch.TILED_FORCED_BY_DEFAULT.edits[0].old + "    });\n    return forced;\n}\n")
VULKAN = ("#include <vulkan/vulkan.hpp>\n\nstatic void other(void) {}\n\n" + patch.VULKAN_LAYER_SETTINGS.kernel_anchor
          + "    std::vector<const char*> extensions;\n" + patch.VULKAN_LAYER_SETTINGS.edits[0].old
          + "#ifdef __APPLE__\n    flags();\n#endif\n\n" + patch.VULKAN_LAYER_SETTINGS.edits[1].old + "}\n")
SOURCES = {patch.FLASH_ATTN_BF16_BLOCKED.source: OPS, patch.Q0_GEMM_VNNI.source: CPU,
           patch.QUANTIZE_Q8_K_AVX2.source: QUANTS, patch.HUGE_PAGES.source: BASE, patch.TILED_FORCED_BY_DEFAULT.source: TILED,
           patch.VULKAN_LAYER_SETTINGS.source: VULKAN}
assert patch.QUANT_GEMM_AVX2.source == patch.Q0_GEMM_VNNI.source


def seen_by(p) -> str:
    """The text of p's source as p sees it: the earlier patches of the same file applied, as patch.apply() does."""
    text = SOURCES[p.source]
    for earlier in patch.PATCHES[:patch.PATCHES.index(p)]:
        if earlier.source == p.source:
            text = earlier.patched(text)
    return text


def llama_cpp_tree(root: Path) -> Path:
    for relative, text in SOURCES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_each_kernel_goes_before_its_dispatch_and_is_called_there(tmp_path):
    patch.apply(llama_cpp_tree(tmp_path))
    ops = (tmp_path / patch.FLASH_ATTN_BF16_BLOCKED.source).read_text()
    assert ops.index("#include <vector>") < ops.index("static void other")
    assert ops.index("ggml_compute_forward_flash_attn_ext_bf16_blocked(\n") < ops.index(
        patch.FLASH_ATTN_BF16_BLOCKED.kernel_anchor)
    cpu = (tmp_path / patch.Q0_GEMM_VNNI.source).read_text()
    assert "static void other" in cpu.split("static void ggml_q0_gemm_vnni(")[0]
    # the VNNI kernel after the AVX2 helpers it uses (the chunks of work, the plane of a matmul)
    assert cpu.index("static inline qg_plane qg_plane_of(") < cpu.index("ggml_q0_gemm_vnni(const struct") < cpu.index(
        patch.Q0_GEMM_VNNI.kernel_anchor)
    # the matmul kernels are called after the barrier that ends the activations' conversion, before tinyBLAS: VNNI's
    # first; the K-quant kernel is decided before ggml's tiled kernel, which it passes by
    assert cpu.index("ggml_barrier") < cpu.index("ggml_q0_gemm_vnni(params, dst)") < cpu.index(
        "ggml_quant_gemm_avx2(params, dst)") < cpu.index("llamafile_sgemm")
    assert cpu.index("quant_gemm_avx2 = !params->use_ref") < cpu.index(
        "!quant_gemm_avx2 && ggml_compute_forward_mul_mat_tiled") < cpu.index("convert(params)")
    assert cpu.index("ggml_quant_gemm_avx2(const struct") < cpu.index(patch.Q0_GEMM_VNNI.kernel_anchor)
    # the AMX kernel comes after the AVX2 one, whose helpers it uses, and takes the AVX2 kernel's call if it will
    assert cpu.index("ggml_quant_gemm_avx2(const struct") < cpu.index("ggml_quant_gemm_amx(const struct") < cpu.index(
        patch.Q0_GEMM_VNNI.kernel_anchor)
    assert cpu.index("if (quant_gemm_avx2) {") < cpu.index("ggml_quant_gemm_amx_takes(dst)") < cpu.index(
        "ggml_quant_gemm_amx(params, dst)") < cpu.index("ggml_quant_gemm_avx2(params, dst)")
    # Q5_0 and Q8_0 without VNNI: the kernel after the AVX2 helpers it uses, its call beside VNNI's, before tinyBLAS
    assert cpu.index("ggml_quant_gemm_avx2(const struct") < cpu.index("ggml_q0_gemm_avx2(const struct") < cpu.index(
        patch.Q0_GEMM_AVX2.kernel_anchor)
    assert cpu.index("ggml_barrier") < cpu.index("ggml_q0_gemm_vnni(params, dst)") < cpu.index(
        "ggml_q0_gemm_avx2(params, dst)") < cpu.index("ggml_quant_gemm_avx2(params, dst)") < cpu.index("llamafile_sgemm")
    # on Linux the threads of a decode wait at the futex barrier, in OpenMP builds too
    barrier = cpu.split(patch.FUTEX_BARRIER.kernel_anchor)
    assert "static void ggml_barrier_wait(" in barrier[0] and "static void ggml_barrier_release(" in barrier[0]
    assert "ggml_barrier_release(tp, n_passed);\n        return;" in barrier[1]
    assert "ggml_barrier_wait(tp, n_passed);" in barrier[1] and "ggml_thread_cpu_relax" not in barrier[1]
    assert "#if defined(GGML_USE_OPENMP) && !defined(__linux__)\n    #pragma omp barrier" in barrier[1]
    # the rounding to Q8_K goes before the function that calls it
    quants = (tmp_path / patch.QUANTIZE_Q8_K_AVX2.source).read_text()
    assert quants.index("static void other") < quants.index("static void ggml_quantize_q8_K_avx2(") < quants.index(
        "    ggml_quantize_q8_K_avx2(x, (block_q8_K *) y, k);")
    # big buffers are allocated on huge pages on Linux, and as before elsewhere
    base = (tmp_path / patch.HUGE_PAGES.source).read_text()
    assert base.index("static void other") < base.index("static int ggml_posix_memalign_huge_pages(") < base.index(
        patch.HUGE_PAGES.kernel_anchor) < base.index("ggml_posix_memalign_huge_pages(&aligned_memory")
    assert "vm_allocate();\n  #else\n  #ifdef __linux__\n" in base
    # ggml's tiled kernel for every row count unless the variable says otherwise: nothing set in the environment
    tiled = (tmp_path / patch.TILED_FORCED_BY_DEFAULT.source).read_text()
    assert tiled.index("static void other") < tiled.index(patch.MARKER) < tiled.index("ggml_tiled_matmul_forced(")
    assert "forced = env == NULL || atoi(env) == 1;" in tiled and "env != NULL" not in tiled
    # the Vulkan instance is made by the helper, which alone names the layer settings (headers 1.3.272 and later)
    vulkan = (tmp_path / patch.VULKAN_LAYER_SETTINGS.source).read_text()
    assert vulkan.index("static void other") < vulkan.index("static vk::Instance ggml_vk_create_instance(") < vulkan.index(
        patch.VULKAN_LAYER_SETTINGS.kernel_anchor) < vulkan.index("ggml_vk_create_instance(instance_create_info, layer_settings)")
    outside = vulkan.split(patch.VULKAN_LAYER_SETTINGS.kernel_anchor)[1]
    assert "LayerSetting" not in outside and "vk::createInstance" not in outside
    for p in patch.PATCHES:
        assert all(edit.new in p.patched(seen_by(p)) for edit in p.edits)
        assert patch.MARKER + p.name in (tmp_path / p.source).read_text()  # what the build fingerprint finds
    assert patch.NAME == ("flash-attn-bf16-blocked, quant-gemm-avx2, q0-gemm-vnni, q0-gemm-avx2, quant-gemm-amx, "
                          "quantize-q8_K-avx2, futex-barrier, huge-pages, tiled-forced-by-default, "
                          "vulkan-layer-settings")


@pytest.mark.parametrize("p", patch.PATCHES, ids=lambda p: p.name)
def test_a_source_without_an_anchor_or_patched_already_is_refused(p, tmp_path):
    text = seen_by(p)
    for edit in p.edits:
        with pytest.raises(patch.PatchError, match=f"{p.name}: .* 0 copies of the {edit.what}"):
            p.patched(text.replace(edit.old, "    ggml_other_dispatch();\n"))
    with pytest.raises(patch.PatchError, match="2 copies of the dispatch function"):
        p.patched(text + p.kernel_anchor)
    with pytest.raises(patch.PatchError, match="patched already"):
        p.patched(p.patched(text))
    with pytest.raises(patch.PatchError, match="no ggml"):
        patch.apply(tmp_path)


def test_the_upgrade_check_names_each_anchor_that_moved(tmp_path):
    """scripts/try_llama_cpp_upgrade.py reports these for another llama-cpp-python release."""
    tree = llama_cpp_tree(tmp_path)
    every = {(c.patch, c.what) for c in upgrade.check_anchors(tree)}
    assert every == {(p.name, what) for p in patch.PATCHES for what in [e.what for e in p.edits] + ["dispatch function"]}
    assert {c.copies for c in upgrade.check_anchors(tree)} == {1}
    moved = patch.QUANT_GEMM_AVX2.edits[0].old
    cpu = tree / patch.Q0_GEMM_VNNI.source
    cpu.write_text(SOURCES[cpu.relative_to(tree)].replace(moved, "    if (tiled_mm(params, dst)) {\n"))
    # the other matmul patches edit the calls that the AVX2 patch puts in, so they cannot go in either
    assert [(c.patch, c.what, c.copies) for c in upgrade.check_anchors(tree) if c.copies != 1] == [
        ("quant-gemm-avx2", "tiled kernel's call", 0), ("q0-gemm-vnni", "quant-gemm-avx2's call", 0),
        ("q0-gemm-avx2", "q0-gemm-vnni's call", 0), ("quant-gemm-amx", "quant-gemm-avx2's call", 0)]
    (tmp_path / patch.FLASH_ATTN_BF16_BLOCKED.source).unlink()
    assert {c.copies for c in upgrade.check_anchors(tree) if c.patch == "flash-attn-bf16-blocked"} == {0}
    cpu.write_text(SOURCES[cpu.relative_to(tree)] + patch.Q0_GEMM_VNNI.kernel_anchor)
    assert {c.copies for c in upgrade.check_anchors(tree) if c.what == "dispatch function"
            and c.patch not in ("flash-attn-bf16-blocked", "quantize-q8_K-avx2", "futex-barrier", "huge-pages",
                                  "tiled-forced-by-default", "vulkan-layer-settings")} == {2}


# A compiler for x86-64 whose -march names these levels (GCC 11 and later, Clang 12 and later).
BASELINE, WITH_UNITS = ["-march=x86-64"], ["-march=x86-64-v4", "-mavx512vnni", "-mavx512vbmi", "-DGGML_SIMD"]
AVX2_ONLY = ["-march=x86-64-v3", "-DGGML_SIMD"]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("cc") is None,
                    reason="the kernels' guards are tested by preprocessing for x86-64 with cc")
@pytest.mark.parametrize("p", [p for p in patch.PATCHES
                               if p not in (patch.FUTEX_BARRIER, patch.HUGE_PAGES, patch.TILED_FORCED_BY_DEFAULT,
                                            patch.VULKAN_LAYER_SETTINGS)],
                         ids=lambda p: p.name)
def test_the_marker_is_built_only_with_its_kernel(p):
    """The fingerprint names a kernel only where its guard compiled it in (SVE, RISC-V V, a CPU without AVX2...).
    A kernel is preprocessed after the kernels that go before it in the same file, whose guards it may build on."""
    language = "c++" if p.kernel.suffix == ".cpp" else "c"
    text = "".join(q.kernel.read_text() for q in patch.PATCHES[:patch.PATCHES.index(p) + 1] if q.source == p.source)

    def preprocessed(flags):
        return subprocess.run(["cc", "-E", "-P", "-x", language, *flags, "-"], input=text, capture_output=True,
                              text=True, check=True).stdout

    if p is patch.Q0_GEMM_AVX2:  # only where q0-gemm-vnni is not
        assert patch.MARKER + p.name in preprocessed(AVX2_ONLY)
        assert patch.MARKER + p.name not in preprocessed(WITH_UNITS)
    else:
        assert patch.MARKER + p.name in preprocessed(WITH_UNITS)
    assert patch.MARKER + p.name not in preprocessed(BASELINE)


@pytest.mark.skipif(shutil.which("cc") is None, reason="the barrier is tested by preprocessing with cc")
def test_the_barrier_is_left_out_of_the_fingerprint():
    """It changes no bits: its marker is in the patched source, for apply(), but not in what is compiled."""
    text = patch.FUTEX_BARRIER.kernel.read_text()
    built = subprocess.run(["cc", "-E", "-P", "-x", "c", "-"], input=text, capture_output=True, text=True,
                           check=True).stdout
    assert patch.MARKER + patch.FUTEX_BARRIER.name in text
    assert "ggml_barrier_wait(" in built and patch.MARKER not in built


# Threads that meet at the patched barrier round after round: before each round a thread writes the round it is in,
# after it checks that every thread had reached it. Four threads on a machine's few cores, a little work of unequal
# length between rounds; built with no spinning, so that every waiter but the last goes to sleep on the futex, and
# a wake-up that is lost leaves the program hanging.
BARRIER_ROUNDS = r"""
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct ggml_threadpool {
    atomic_int n_barrier;
    atomic_int n_barrier_passed;
    int n_threads;
};

static void ggml_thread_cpu_relax(void) {}

%s
enum { THREADS = 4, ROUNDS = 20000 };
static struct ggml_threadpool pool = { 0, 0, THREADS };
static atomic_int reached[THREADS];
static atomic_int early;

static void * rounds(void * arg) {
    int me = (int) (intptr_t) arg;
    unsigned seed = (unsigned) me + 1;
    for (int round = 1; round <= ROUNDS; round++) {
        for (volatile int work = rand_r(&seed) %% 2000; work > 0; work--) {}
        atomic_store(&reached[me], round);
        ggml_barrier(&pool);
        for (int other = 0; other < THREADS; other++) {
            if (atomic_load(&reached[other]) < round) {
                atomic_fetch_add(&early, 1);
            }
        }
        ggml_barrier(&pool);
    }
    return NULL;
}

int main(void) {
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        pthread_create(&threads[t], NULL, rounds, (void *) (intptr_t) t);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    printf("%%d %%d\n", atomic_load(&early), atomic_load(&pool.n_barrier_passed));
    return 0;
}
"""


@pytest.mark.skipif(platform.system() != "Linux" or shutil.which("cc") is None,
                    reason="the futex barrier is built and run on Linux with cc")
def test_threads_sleeping_at_the_barrier_are_all_woken_and_none_passes_early(tmp_path):
    program = BARRIER_ROUNDS % patch.FUTEX_BARRIER.patched(BARRIER)
    assert "ggml_barrier_release(tp, n_passed)" in program
    (tmp_path / "rounds.c").write_text(program)
    subprocess.run(["cc", "-std=gnu11", "-O2", "-Wall", "-Werror", "-DGGML_BARRIER_SPINS_BEFORE_SLEEP=0", "-o",
                    str(tmp_path / "rounds"), str(tmp_path / "rounds.c"), "-lpthread"], check=True)
    early, passed = subprocess.run([str(tmp_path / "rounds")], capture_output=True, text=True, timeout=120,
                                   check=True).stdout.split()
    assert int(early) == 0
    assert int(passed) == 2 * 20000  # every barrier passed once, and no sleeper's bit left behind


@pytest.mark.skipif(shutil.which("cc") is None, reason="the allocation's guard is tested by preprocessing with cc")
def test_huge_pages_are_asked_for_on_linux_only():
    text = patch.HUGE_PAGES.kernel.read_text()

    def preprocessed(flags):
        return subprocess.run(["cc", "-E", "-P", "-x", "c", *flags, "-"], input=text, capture_output=True, text=True,
                              check=True).stdout

    linux, elsewhere = preprocessed(["-D__linux__"]), preprocessed(["-U__linux__"])
    marker = patch.MARKER + patch.HUGE_PAGES.name
    assert "madvise(" in linux and marker in linux
    assert "madvise(" not in elsewhere and marker not in elsewhere


def test_the_wheel_directory_changes_with_the_patch(monkeypatch, tmp_path):
    build = repo_modules.load("scripts/build_llama_cpp.py", "build_llama_cpp")
    before = build.wheel_dir(tmp_path, "none", [], ["-mavx2"])
    monkeypatch.setattr(build.llama_cpp_patch, "digest", lambda: "another")
    assert build.wheel_dir(tmp_path, "none", [], ["-mavx2"]) != before


@pytest.mark.skipif(shutil.which("c++") is None, reason="the headers' guard is tested by preprocessing with c++")
def test_the_vulkan_layer_settings_are_built_only_with_headers_that_have_them():
    """Debian 12's Vulkan headers (1.3.239) lack VK_EXT_layer_settings (1.3.272): the instance is made without."""
    def preprocessed(version):
        return subprocess.run(["c++", "-E", "-P", "-x", "c++", f"-DVK_HEADER_VERSION={version}", "-"],
                              input=patch.VULKAN_LAYER_SETTINGS.kernel.read_text(), capture_output=True, text=True,
                              check=True).stdout

    old, new = preprocessed(239), preprocessed(272)
    assert "LayerSetting" not in old and "info.pNext = &layer_setting_info;" in new
    assert old.count("vk::createInstance(info)") == new.count("vk::createInstance(info)") == 1
