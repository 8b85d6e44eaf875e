"""Recommended models loaded by name: from a hub on loopback (the real list's entry and checksum), and from a
package index on loopback (pip, as a user runs it) when the hub fails."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import newrllama
from newrllama.models import catalog
from newrllama.models.catalog import RecommendedModel
from newrllama.models.pypi_chunks import PyPIChunks
from helpers.model_server import ModelServer
from helpers.package_index import PackageIndex, chunk_wheel
from helpers.small_gguf import small_gguf

SMALL_NAME = "qwen2.5-coder-0.5b-instruct"
SMALL = next(m for m in catalog.RECOMMENDED if m.name == SMALL_NAME)
SMALL_CACHED = newrllama.models.embedded.cache_dir() / SMALL.file_name  # the user's cache, before a test moves it


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_list_names_each_file_by_size_checksum_licence_and_sources():
    table = newrllama.recommended_models().to_pandas()
    assert table["name"].tolist()[0] == "qwen2.5-coder-1.5b-instruct"  # the recommended one first
    assert table["name"].is_unique and table["file_name"].is_unique
    assert all(len(s) == 64 for s in table["sha256"]) and (table["size"] > 0).all()
    assert set(table["licence"]) == {"Apache-2.0"}
    assert all(h.startswith("hf://Qwen/") for h in table["hub"]) and all(p.startswith("PyPI ") for p in table["pypi"])


def test_the_list_says_which_files_are_cached(cache):
    assert not newrllama.recommended_models().to_pandas()["cached"].any()
    cache.mkdir()
    (cache / SMALL.file_name).write_bytes(b"")
    assert dict(zip(*newrllama.recommended_models().to_pandas()[["name", "cached"]].T.values)) == {
        "qwen2.5-coder-1.5b-instruct": False, SMALL_NAME: True}


@pytest.mark.skipif(not SMALL_CACHED.exists(), reason=f"{SMALL.file_name} is not in the cache (scripts/fetch_instruct_model.py)")
def test_a_model_loads_by_name_from_the_hub_then_from_the_cache(cache, monkeypatch):
    real = SMALL_CACHED
    server = ModelServer({SMALL.file_name: real})
    try:
        monkeypatch.setenv("NEWRLLAMA_HF_ENDPOINT", server.url)
        assert server.sha[SMALL.file_name] == SMALL.sha256  # the list's checksum is the file's
        with newrllama.Model(SMALL_NAME) as model:
            assert model.source == SMALL_NAME and Path(model.path).parent.parent == cache
            assert model.tokenize("Hello") == newrllama.Model(real).tokenize("Hello")
        hub = f"/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/{SMALL.file_name}"
        assert [p for p, _ in server.requests if p == hub]  # the entry's own hub address was asked
        asked = len(server.requests)
        with newrllama.Model(SMALL_NAME) as again:
            assert again.path == model.path
        assert len(server.requests) == asked  # no request at all
    finally:
        server.close()


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A package index on loopback as pip's only source, and a hub that has nothing."""
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    served = PackageIndex(tmp_path / "index")
    monkeypatch.setenv("PIP_INDEX_URL", served.url)
    hub = ModelServer({})
    monkeypatch.setenv("NEWRLLAMA_HF_ENDPOINT", hub.url)
    yield served
    served.close()
    hub.close()


def kept(cache: Path):
    return sorted(p.name for p in cache.rglob("*") if not p.is_dir() and not p.name.endswith(".lock"))


def published(index, tmp_path, content: bytes, parts: int, sha256=None) -> RecommendedModel:
    """An entry whose file is ``content``, published on the index in ``parts`` chunks."""
    chunks = PyPIChunks("nl-test-chunk-part", parts, "1.0.0")
    step = -(-len(content) // parts)
    for k in range(1, parts + 1):
        wheel = chunk_wheel(tmp_path, chunks.package, chunks.version, k, content[(k - 1) * step:k * step])
        index.add(f"{chunks.package}{k}", wheel)
    return RecommendedModel("test-model", "a test", "test-model.gguf", len(content),
                            sha256 or hashlib.sha256(content).hexdigest(), "Apache-2.0",
                            "hf://owner/repo/test-model.gguf", chunks)


def test_the_pypi_chunks_stand_in_when_the_hub_fails(cache, index, tmp_path, monkeypatch):
    content = small_gguf(3 * 1024 * 1024)
    entry = published(index, tmp_path, content, parts=11)  # part1 and part10/part11 must not be confused
    monkeypatch.setattr(catalog, "RECOMMENDED", (entry,))
    path = catalog.recommended_path("test-model", progress=False)
    assert Path(path) == cache / "test-model.gguf" and Path(path).read_bytes() == content
    assert kept(cache) == ["test-model.gguf", "test-model.gguf.json"]  # no chunk, package or part left behind
    asked = len(index.requests)
    assert catalog.recommended_path("test-model") == path and len(index.requests) == asked


def test_wrong_chunks_or_a_missing_package_fail_with_both_causes_and_keep_nothing(cache, index, tmp_path,
                                                                                   monkeypatch):
    content = small_gguf(1024 * 1024)
    entry = published(index, tmp_path, content, parts=2, sha256="0" * 64)
    monkeypatch.setattr(catalog, "RECOMMENDED", (entry,))
    with pytest.raises(newrllama.ModelLoadError, match=r"from the hub: .*404.*from PyPI: .*SHA-256 .*nothing was kept"):
        catalog.recommended_path("test-model")
    missing = RecommendedModel("gone", "a test", "gone.gguf", 10, "0" * 64, "Apache-2.0", "hf://owner/repo/gone.gguf",
                               PyPIChunks("nl-test-absent-part", 1, "1.0.0"))
    monkeypatch.setattr(catalog, "RECOMMENDED", (missing,))
    with pytest.raises(newrllama.ModelLoadError, match=r"pip could not fetch .*nl-test-absent-part1"):
        newrllama.Model("gone")
    assert kept(cache) == []


def test_a_checksum_cannot_be_given_with_a_name_and_a_changed_cached_file_is_refused(cache, index, tmp_path,
                                                                                     monkeypatch):
    with pytest.raises(newrllama.InvalidArgumentError, match="its own SHA-256"):
        newrllama.Model(SMALL_NAME, sha256="0" * 64)
    content = small_gguf(1024 * 1024)
    entry = published(index, tmp_path, content, parts=1)
    monkeypatch.setattr(catalog, "RECOMMENDED", (entry,))
    path = Path(catalog.recommended_path("test-model"))
    path.write_bytes(content[:-1])  # the record keeps the hash while the size holds: a cut file is hashed again
    with pytest.raises(newrllama.ModelLoadError, match="delete it to fetch it again"):
        catalog.recommended_path("test-model")
