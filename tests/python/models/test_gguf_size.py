"""The size a GGUF header says its file must have: real models, hand-written files, and cut ones."""
from __future__ import annotations

import collections
import os
import struct

import pytest

import newrllama
from newrllama.models.gguf_size import gguf_tensors, required_size
from helpers.small_gguf import UNKNOWN_TYPE, small_gguf


def test_the_embedded_model_needs_exactly_its_size():
    path = newrllama.default_model_path()
    assert required_size(path) == os.path.getsize(path)


def test_the_embedded_model_lists_its_tensors_with_their_types_and_sizes():
    tensors = gguf_tensors(newrllama.default_model_path())
    by_type = collections.Counter(t.ggml_type for t in tensors)
    assert {6: 81, 8: 10, 12: 27, 14: 9}.items() <= by_type.items()  # Q5_0, Q8_0, Q4_K, Q6_K, as the docs say
    embeddings = next(t for t in tensors if t.name == "token_embd.weight")
    assert embeddings.shape == (640, 262144) and embeddings.n_bytes == 640 // 32 * 34 * 262144  # Q8_0
    ends = sorted((t.offset, t.offset + t.n_bytes) for t in tensors)
    assert all(end <= start for (_, end), (start, _) in zip(ends, ends[1:]))  # no two overlap
    assert ends[-1][1] - sum(t.n_bytes for t in tensors) < 32 * len(tensors)  # back to back, but for alignment


def test_a_model_cut_in_its_header_needs_more_than_it_has(tmp_path):
    cut = tmp_path / "cut.gguf"
    with open(newrllama.default_model_path(), "rb") as f:
        cut.write_bytes(f.read(1 << 20))  # the header holds a 262,144-token vocabulary: it goes on past 1 MiB
    assert required_size(cut) > 1 << 20


def test_a_file_cut_in_its_data_needs_more_than_it_has(tmp_path):
    whole = small_gguf(4096)
    path = tmp_path / "small.gguf"
    path.write_bytes(whole)
    assert required_size(path) == 4096
    path.write_bytes(whole[:-1])
    assert required_size(path) == 4096
    path.write_bytes(whole[:20])
    assert required_size(path) > 20


def test_what_it_cannot_size_is_none_and_its_tensors_an_error(tmp_path):
    path = tmp_path / "unknown.gguf"
    path.write_bytes(small_gguf(4096, tensor_type=UNKNOWN_TYPE))
    assert required_size(path) is None
    path.write_bytes(b"GGUF" + struct.pack("<I", 1) + small_gguf(4096)[8:])  # version 1: other field widths
    assert required_size(path) is None
    with pytest.raises(ValueError, match="cannot read the tensors"):
        gguf_tensors(path)
