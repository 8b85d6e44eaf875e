"""capi_shim/llama_cpp_patch: newrllama's patch of the vendored llama.cpp goes in where its anchors are, refuses a
source it was not written for or one patched already, and names the patch its wheel is built with."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("llama_cpp_patch", ROOT / "capi_shim" / "llama_cpp_patch" / "apply.py")
patch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(patch)

# The three places of llama.cpp's ops.cpp the patch edits, as in the llama.cpp that llama-cpp-python 0.3.36 vendors.
OPS = ("#include \"ops.h\"\n#include <algorithm>\n#include <cfloat>\n\nstatic void other(void) {}\n\n"
       + patch.KERNEL_ANCHOR + "        const ggml_compute_params * params,\n        ggml_tensor * dst) {\n"
       + patch.DISPATCH + "\n                one_by_one(params, dst, ir0, ir1, 0, nek1, nullptr, 0);\n            }\n}\n")


def test_the_kernel_goes_before_the_dispatch_and_takes_the_bf16_rows(tmp_path):
    ops = tmp_path / patch.OPS
    ops.parent.mkdir(parents=True)
    ops.write_text(OPS)
    patch.apply(tmp_path)
    text = ops.read_text()
    assert text.index("#include <vector>") < text.index("static void other")
    assert text.index("ggml_compute_forward_flash_attn_ext_bf16_blocked(\n") < text.index(patch.KERNEL_ANCHOR)
    assert patch.PATCHED_DISPATCH in text and patch.DISPATCH not in text
    assert "newrllama-llama-cpp-patch: " + patch.NAME in text  # what the build fingerprint finds


def test_a_source_without_an_anchor_or_patched_already_is_refused(tmp_path):
    with pytest.raises(patch.PatchError, match="one-by-one attention call"):
        patch.patched_ops(OPS.replace(patch.DISPATCH, "            ggml_other_dispatch();"))
    with pytest.raises(patch.PatchError, match="2 copies of the attention dispatch function"):
        patch.patched_ops(OPS + patch.KERNEL_ANCHOR)
    with pytest.raises(patch.PatchError, match="patched already"):
        patch.patched_ops(patch.patched_ops(OPS))
    with pytest.raises(patch.PatchError, match="no ggml"):
        patch.apply(tmp_path)


def test_the_wheel_directory_changes_with_the_patch(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("build_llama_cpp", ROOT / "scripts" / "build_llama_cpp.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    before = build.wheel_dir(tmp_path, "none", [], ["-mavx2"])
    monkeypatch.setattr(build.llama_cpp_patch, "digest", lambda: "another")
    assert build.wheel_dir(tmp_path, "none", [], ["-mavx2"]) != before
