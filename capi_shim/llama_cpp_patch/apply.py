"""newrllama's patches of the llama.cpp that llama-cpp-python vendors, applied by scripts/build_llama_cpp.py to
the extracted source archive before the wheel is built.

Six changes to ggml's CPU backend, each a kernel (its file here says why) inserted before the function that
dispatches its op, and calls where the dispatch would take llama.cpp's own path:
- flash-attn-bf16-blocked, in ggml/src/ggml-cpu/ops.cpp: attention over bf16 K and V in blocks of cells
  (flash_attn_bf16_blocked.cpp) takes the rows that llama.cpp would attend cell by cell;
- quant-gemm-avx2, in ggml/src/ggml-cpu/ggml-cpu.c: the matmul of Q4_K, Q5_K and Q6_K weights with AVX2
  (quant_gemm_avx2.c) for every number of rows, where llama.cpp would take its tiled kernel or vec_dot;
- q0-gemm-vnni, in the same file: the matmul of Q5_0 and Q8_0 weights with AVX512-VNNI (q0_gemm_vnni.c) where
  llama.cpp would call llamafile's tinyBLAS; compiled in only where the CPU has it. It goes after
  quant-gemm-avx2, whose helpers it uses, and its call first;
- q0-gemm-avx2, in the same file: the matmul of Q5_0 and Q8_0 weights with AVX2 (q0_gemm_avx2.c), with
  q0-gemm-vnni's bits, where the CPU has AVX2 but not AVX512-VNNI (so tinyBLAS takes them nowhere). It goes after
  quant-gemm-avx2, whose helpers it uses, and its call after q0-gemm-vnni's;
- quant-gemm-amx, in the same file: the same matmul with AMX tiles (quant_gemm_amx.c) from 8 activation rows up,
  with quant-gemm-avx2's bits, where the CPU has AMX-INT8 and the kernel lets the process use it. It goes after
  quant-gemm-avx2, whose helpers and call it uses;
- quantize-q8_K-avx2, in ggml/src/ggml-cpu/arch/x86/quants.c: the rounding of activations to Q8_K that the
  K-quant kernels multiply, with AVX2 (quantize_q8_K_avx2.c), the reference's values bit for bit, where ggml's x86
  build calls the scalar reference.
One to a setting of the CPU backend:
- tiled-forced-by-default, in ggml/src/ggml-cpu/tiled/tiled.cpp: ggml's tiled kernel for every number of rows
  (batch invariance for the weight types the kernels above do not take) unless GGML_CPU_TILED_MM_FORCE says
  otherwise, so that nothing need be set in the process's environment, which child processes inherit
  (tiled_forced_by_default.cpp).
One to ggml's threads:
- futex-barrier, in ggml/src/ggml-cpu/ggml-cpu.c: on Linux the threads of a decode meet at ggml's counter barrier,
  which spins for a while and then sleeps on a futex (futex_barrier.c), where an OpenMP build would meet at
  libgomp's, which sleeps almost at once when the process holds more OpenMP threads than cores. It changes no bits,
  and its marker is in the source only, so the build fingerprint does not name it.
And one to ggml's allocation:
- huge-pages, in ggml/src/ggml.c: buffers of 2 MiB and more on transparent huge pages, on Linux (huge_pages.c). It
  changes no bits, and is built into ggml's base library, so the build fingerprint does not name it.
And one to the Vulkan backend's build:
- vulkan-layer-settings, in ggml/src/ggml-vulkan/ggml-vulkan.cpp: the instance's validation-layer settings only
  where the Vulkan headers have them (1.3.272 and later), so that the backend builds with Debian 12's 1.3.239
  (vulkan_layer_settings.cpp).
Each edit names the text it expects, so that a llama.cpp whose source moved fails the build here, with the edit
named, rather than building without the patch.

stdlib only: it runs before anything is installed.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple, Tuple

HERE = Path(__file__).resolve().parent
MARKER = "newrllama-llama-cpp-patch: "  # followed by the patch's name, in the built library


class PatchError(RuntimeError):
    """The llama.cpp source is not the one the patch was written for."""


class Edit(NamedTuple):
    what: str                           # how an error names it
    old: str                            # llama.cpp's text, found exactly once...
    new: str                            # ...and what replaces it


class Patch(NamedTuple):
    name: str
    source: Path                        # the file of llama.cpp it edits, from llama.cpp's root
    kernel: Path                        # the text it inserts before kernel_anchor
    kernel_anchor: str
    edits: Tuple[Edit, ...]             # the calls of the kernel (and anything else it needs), in order

    def patched(self, text: str) -> str:
        """The source's text with this patch applied."""
        if MARKER + self.name in text:
            raise PatchError(f"llama.cpp patch {self.name}: {self.source} is patched already")
        for edit in self.edits:
            text = self._replace_once(text, edit.old, edit.new, edit.what)
        return self._replace_once(text, self.kernel_anchor, self.kernel.read_text() + self.kernel_anchor,
                                  "dispatch function")

    def _replace_once(self, text: str, old: str, new: str, what: str) -> str:
        n = text.count(old)
        if n != 1:
            raise PatchError(f"llama.cpp patch {self.name}: {self.source} has {n} copies of the {what} "
                             "(expected 1): this llama.cpp is not the one the patch was written for")
        return text.replace(old, new)


FLASH_ATTN_BF16_BLOCKED = Patch(
    name="flash-attn-bf16-blocked",
    source=Path("ggml") / "src" / "ggml-cpu" / "ops.cpp",
    kernel=HERE / "flash_attn_bf16_blocked.cpp",
    kernel_anchor="static void ggml_compute_forward_flash_attn_ext_f16(\n",
    edits=(
        Edit("#include <algorithm> include", "#include <algorithm>\n", "#include <algorithm>\n#include <vector>\n"),
        Edit("call to replace", """            if (use_tiled) {
                ggml_compute_forward_flash_attn_ext_tiled(params, dst, ir0, ir1);
            } else {""", """            if (use_tiled) {
                ggml_compute_forward_flash_attn_ext_tiled(params, dst, ir0, ir1);
#ifdef GGML_FA_BF16_BLOCKED
            } else if (!use_ref && ggml_fa_bf16_blocked_supports(q, k, v)) {
                ggml_compute_forward_flash_attn_ext_bf16_blocked(params, dst, ir0, ir1);
#endif
            } else {"""),
    ),
)

# The K-quants: ggml's tiled kernel is passed by, then the call goes after the barrier that ends the activations'
# conversion to Q8_K, where tinyBLAS would take them.
QUANT_GEMM_AVX2 = Patch(
    name="quant-gemm-avx2",
    source=Path("ggml") / "src" / "ggml-cpu" / "ggml-cpu.c",
    kernel=HERE / "quant_gemm_avx2.c",
    kernel_anchor="void ggml_compute_forward_mul_mat(\n",
    edits=(
        Edit("tiled kernel's call", """    if (ggml_compute_forward_mul_mat_tiled(params, dst)) {
""", """#ifdef GGML_QUANT_GEMM_AVX2
    const bool quant_gemm_avx2 = !params->use_ref && ggml_quant_gemm_avx2_supports(dst);
#else
    const bool quant_gemm_avx2 = false;
#endif
    if (!quant_gemm_avx2 && ggml_compute_forward_mul_mat_tiled(params, dst)) {
"""),
        Edit("call to replace", """#if GGML_USE_LLAMAFILE
    if (src1->type != vec_dot_type) {
        const void* wdata""", """#ifdef GGML_QUANT_GEMM_AVX2
    if (quant_gemm_avx2) {
        ggml_quant_gemm_avx2(params, dst);
        return;
    }
#endif
#if GGML_USE_LLAMAFILE
    if (src1->type != vec_dot_type) {
        const void* wdata"""),
    ),
)

# Q5_0 and Q8_0: the call goes after the barrier that ends the activations' conversion to Q8_0, before
# quant-gemm-avx2's (so this patch goes after that one, whose helpers its kernel uses).
Q0_GEMM_VNNI = Patch(
    name="q0-gemm-vnni",
    source=QUANT_GEMM_AVX2.source,
    kernel=HERE / "q0_gemm_vnni.c",
    kernel_anchor=QUANT_GEMM_AVX2.kernel_anchor,
    edits=(Edit("quant-gemm-avx2's call", """    ggml_barrier(params->threadpool);

#ifdef GGML_QUANT_GEMM_AVX2
    if (quant_gemm_avx2) {
""", """    ggml_barrier(params->threadpool);

#ifdef GGML_Q0_GEMM_VNNI
    if (!params->use_ref && ggml_q0_gemm_vnni_supports(dst)) {
        ggml_q0_gemm_vnni(params, dst);
        return;
    }
#endif
#ifdef GGML_QUANT_GEMM_AVX2
    if (quant_gemm_avx2) {
"""),),
)

# Many activation rows: the AMX kernel, if it takes them, before quant-gemm-avx2 would.
QUANT_GEMM_AMX = Patch(
    name="quant-gemm-amx",
    source=QUANT_GEMM_AVX2.source,
    kernel=HERE / "quant_gemm_amx.c",
    kernel_anchor=QUANT_GEMM_AVX2.kernel_anchor,
    edits=(Edit("quant-gemm-avx2's call", """    if (quant_gemm_avx2) {
        ggml_quant_gemm_avx2(params, dst);
""", """    if (quant_gemm_avx2) {
#ifdef GGML_QUANT_GEMM_AMX
        if (ggml_quant_gemm_amx_takes(dst)) {
            ggml_quant_gemm_amx(params, dst);
            return;
        }
#endif
        ggml_quant_gemm_avx2(params, dst);
"""),),
)

QUANTIZE_Q8_K_AVX2 = Patch(
    name="quantize-q8_K-avx2",
    source=Path("ggml") / "src" / "ggml-cpu" / "arch" / "x86" / "quants.c",
    kernel=HERE / "quantize_q8_K_avx2.c",
    kernel_anchor="// placeholder implementation for Apple targets\n",
    edits=(Edit("call of the scalar reference", """void quantize_row_q8_K(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) {
    quantize_row_q8_K_ref(x, y, k);
}""", """void quantize_row_q8_K(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) {
#ifdef GGML_QUANTIZE_Q8_K_AVX2
    ggml_quantize_q8_K_avx2(x, (block_q8_K *) y, k);
#else
    quantize_row_q8_K_ref(x, y, k);
#endif
}"""),),
)

HUGE_PAGES = Patch(
    name="huge-pages",
    source=Path("ggml") / "src" / "ggml.c",
    kernel=HERE / "huge_pages.c",
    kernel_anchor="void * ggml_aligned_malloc(size_t size) {\n",
    edits=(Edit("allocation to replace", """    int result = posix_memalign(&aligned_memory, alignment, size);
  #endif""", """  #ifdef __linux__
    int result = ggml_posix_memalign_huge_pages(&aligned_memory, alignment, size);
  #else
    int result = posix_memalign(&aligned_memory, alignment, size);
  #endif
  #endif"""),),
)

# Q5_0 and Q8_0 without AVX512-VNNI: the call goes beside q0-gemm-vnni's, the kernel after quant-gemm-avx2's helpers.
Q0_GEMM_AVX2 = Patch(
    name="q0-gemm-avx2",
    source=QUANT_GEMM_AVX2.source,
    kernel=HERE / "q0_gemm_avx2.c",
    kernel_anchor=QUANT_GEMM_AVX2.kernel_anchor,
    edits=(Edit("q0-gemm-vnni's call", """        ggml_q0_gemm_vnni(params, dst);
        return;
    }
#endif
""", """        ggml_q0_gemm_vnni(params, dst);
        return;
    }
#endif
#ifdef GGML_Q0_GEMM_AVX2
    if (!params->use_ref && ggml_q0_gemm_avx2_supports(dst)) {
        ggml_q0_gemm_avx2(params, dst);
        return;
    }
#endif
"""),),
)

# ggml's barrier without libgomp on Linux: the counter barrier that ggml builds without OpenMP, spinning and then
# sleeping on a futex.
FUTEX_BARRIER = Patch(
    name="futex-barrier",
    source=QUANT_GEMM_AVX2.source,
    kernel=HERE / "futex_barrier.c",
    kernel_anchor="void ggml_barrier(struct ggml_threadpool * tp) {\n",
    edits=(
        Edit("OpenMP's barrier", """#ifdef GGML_USE_OPENMP
    #pragma omp barrier
#else
    int n_passed = atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed);
""", """#if defined(GGML_USE_OPENMP) && !defined(__linux__)
    #pragma omp barrier
#else
    int n_passed = ggml_barrier_passed(tp);
"""),
        Edit("barrier's release", """        atomic_fetch_add_explicit(&tp->n_barrier_passed, 1, memory_order_seq_cst);
        return;
""", """        ggml_barrier_release(tp, n_passed);
        return;
"""),
        Edit("barrier's wait", """    while (atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) == n_passed) {
        ggml_thread_cpu_relax();
    }
""", """    ggml_barrier_wait(tp, n_passed);
"""),
    ),
)

# ggml's tiled kernel for every row count unless GGML_CPU_TILED_MM_FORCE says otherwise, with nothing set in the
# process's environment.
TILED_FORCED_BY_DEFAULT = Patch(
    name="tiled-forced-by-default",
    source=Path("ggml") / "src" / "ggml-cpu" / "tiled" / "tiled.cpp",
    kernel=HERE / "tiled_forced_by_default.cpp",
    kernel_anchor="// GGML_CPU_TILED_MM_FORCE: test/bench only, take the tiled path even when unprofitable\n",
    edits=(Edit("setting's default", "        forced = env != NULL && atoi(env) == 1;\n",
                "        forced = env == NULL || atoi(env) == 1;\n"),),
)

# Vulkan headers older than 1.3.272 (Debian 12's): the instance's layer settings only where the headers have them.
VULKAN_LAYER_SETTINGS = Patch(
    name="vulkan-layer-settings",
    source=Path("ggml") / "src" / "ggml-vulkan" / "ggml-vulkan.cpp",
    kernel=HERE / "vulkan_layer_settings.cpp",
    kernel_anchor="void ggml_vk_instance_init() {\n",
    edits=(
        Edit("layer settings", """    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, &layer_setting_info);
""", """    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);
"""),
        Edit("instance creation", """    vk_instance.instance = vk::createInstance(instance_create_info);
""", """    vk_instance.instance = ggml_vk_create_instance(instance_create_info, layer_settings);
"""),
    ),
)
PATCHES = (FLASH_ATTN_BF16_BLOCKED, QUANT_GEMM_AVX2, Q0_GEMM_VNNI, Q0_GEMM_AVX2, QUANT_GEMM_AMX, QUANTIZE_Q8_K_AVX2,
           FUTEX_BARRIER, HUGE_PAGES, TILED_FORCED_BY_DEFAULT, VULKAN_LAYER_SETTINGS)
NAME = ", ".join(p.name for p in PATCHES)


def digest() -> str:
    """What the patches are, for the name of the wheel built with them."""
    h = hashlib.sha256()
    for part in (Path(__file__), *(p.kernel for p in PATCHES)):
        h.update(part.read_bytes())
    return h.hexdigest()[:12]


def apply(llama_cpp_root: Path) -> None:
    """Patches the llama.cpp source tree at llama_cpp_root in place."""
    for p in PATCHES:
        source = Path(llama_cpp_root) / p.source
        if not source.is_file():
            raise PatchError(f"llama.cpp patch {p.name}: no {p.source} under {llama_cpp_root}")
        source.write_text(p.patched(source.read_text()))
