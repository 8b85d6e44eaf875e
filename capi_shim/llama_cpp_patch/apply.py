"""newrllama's patch of the llama.cpp that llama-cpp-python vendors, applied by scripts/build_llama_cpp.py to
the extracted source archive before the wheel is built.

One change, in ggml/src/ggml-cpu/ops.cpp: attention over bf16 K and V in blocks of cells
(flash_attn_bf16_blocked.cpp, which says why) takes the rows that llama.cpp would attend cell by cell. Its
text is inserted before the function that dispatches attention, and the dispatch calls it where the
one-by-one path was taken for bf16 cells. Each edit names the text it expects, so that a llama.cpp whose
source moved fails the build here, with the edit named, rather than building without the patch.

stdlib only: it runs before anything is installed.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME = "flash-attn-bf16-blocked"
KERNEL = HERE / "flash_attn_bf16_blocked.cpp"
OPS = Path("ggml") / "src" / "ggml-cpu" / "ops.cpp"

INCLUDE_ANCHOR = "#include <algorithm>\n"
KERNEL_ANCHOR = "static void ggml_compute_forward_flash_attn_ext_f16(\n"
DISPATCH = """            if (use_tiled) {
                ggml_compute_forward_flash_attn_ext_tiled(params, dst, ir0, ir1);
            } else {"""
PATCHED_DISPATCH = """            if (use_tiled) {
                ggml_compute_forward_flash_attn_ext_tiled(params, dst, ir0, ir1);
#ifdef GGML_FA_BF16_BLOCKED
            } else if (!use_ref && ggml_fa_bf16_blocked_supports(q, k, v)) {
                ggml_compute_forward_flash_attn_ext_bf16_blocked(params, dst, ir0, ir1);
#endif
            } else {"""


class PatchError(RuntimeError):
    """The llama.cpp source is not the one the patch was written for."""


def digest() -> str:
    """What the patch is, for the name of the wheel built with it."""
    h = hashlib.sha256()
    for part in (Path(__file__), KERNEL):
        h.update(part.read_bytes())
    return h.hexdigest()[:12]


def _replace_once(text: str, old: str, new: str, what: str) -> str:
    n = text.count(old)
    if n != 1:
        raise PatchError(f"llama.cpp patch {NAME}: {OPS} has {n} copies of the {what} (expected 1): "
                         "this llama.cpp is not the one the patch was written for")
    return text.replace(old, new)


def patched_ops(text: str) -> str:
    """ops.cpp's text with the patch applied."""
    if "newrllama_llama_cpp_patch" in text:
        raise PatchError(f"llama.cpp patch {NAME}: {OPS} is patched already")
    text = _replace_once(text, INCLUDE_ANCHOR, INCLUDE_ANCHOR + "#include <vector>\n", "<algorithm> include")
    text = _replace_once(text, KERNEL_ANCHOR, KERNEL.read_text() + KERNEL_ANCHOR, "attention dispatch function")
    return _replace_once(text, DISPATCH, PATCHED_DISPATCH, "one-by-one attention call")


def apply(llama_cpp_root: Path) -> None:
    """Patches the llama.cpp source tree at llama_cpp_root in place."""
    ops = Path(llama_cpp_root) / OPS
    if not ops.is_file():
        raise PatchError(f"llama.cpp patch {NAME}: no {OPS} under {llama_cpp_root}")
    ops.write_text(patched_ops(ops.read_text()))
