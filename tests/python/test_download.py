"""Models from URLs and hf:// addresses, against a real HTTP server on loopback that stands in for the hub."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import newrllama
from newrllama.download import cached_path, fetch
from model_server import ModelServer

SMALL = 6 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub")
    small = folder / "small.gguf"
    small.write_bytes(b"GGUF" + os.urandom(SMALL - 4))
    page = folder / "page.gguf"
    page.write_bytes(b"<!doctype html><title>Log in</title>" * 10)
    s = ModelServer({"gemma.gguf": Path(newrllama.default_model_path()), "small.gguf": small, "other.gguf": small,
                     "page.gguf": page, "gated.gguf": small})
    s.gated.add("gated.gguf")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch, server):
    monkeypatch.setenv("NEWRLLAMA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("NEWRLLAMA_HF_TOKEN", raising=False)
    monkeypatch.setenv("NEWRLLAMA_HF_ENDPOINT", server.url)
    server.cut_after, server.delay, server.lie = None, 0.0, False
    return tmp_path / "cache"


def leftovers(cache):
    models = cache / "models"
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) if models.exists() else []


def test_a_url_is_downloaded_once_then_loaded_from_the_cache(server):
    url = f"{server.url}/files/gemma.gguf"
    with newrllama.Model(url) as model:
        assert model.source == url and model.path == str(cached_path(url))
        assert model.tokenize("Hello") == newrllama.Model().tokenize("Hello")
    assert server.hits("/files/gemma.gguf") == 1
    with newrllama.Model(url, sha256=server.sha["gemma.gguf"]) as again:
        assert again.path == model.path
    assert server.hits("/files/gemma.gguf") == 1  # no request at all
    with pytest.raises(newrllama.ModelLoadError, match="not the .* asked for"):
        newrllama.Model(url, sha256="ab" * 32)


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(server, cache):
    url = f"{server.url}/files/small.gguf"
    with pytest.raises(newrllama.ModelLoadError, match="not " + "cd" * 32 + r" \(the one asked for\)"):
        fetch(url, sha256="CD" * 32)
    assert leftovers(cache) == []
    assert hashlib.sha256(Path(fetch(url, sha256=server.sha["small.gguf"])).read_bytes()).hexdigest() == \
        server.sha["small.gguf"]


def test_a_cut_download_resumes_with_a_range_request(server, cache):
    url = f"{server.url}/files/small.gguf"
    server.cut_after = 2 * 1024 * 1024
    with pytest.raises(newrllama.ModelLoadError, match="load it again to resume"):
        fetch(url)
    part = cached_path(url).with_name(cached_path(url).name + ".part")
    assert part.stat().st_size == 2 * 1024 * 1024 and not cached_path(url).exists()
    server.cut_after = None
    path = fetch(url)
    assert server.requests[-1][1].get("Range") == f"bytes={2 * 1024 * 1024}-"
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == server.sha["small.gguf"]
    assert leftovers(cache) == sorted([cached_path(url).name, cached_path(url).name + ".json"])


FETCH = "import sys; from newrllama.download import fetch; print(fetch(sys.argv[1]))"


def test_two_processes_loading_one_url_do_not_corrupt_each_other(server, cache):
    url = f"{server.url}/files/other.gguf"
    server.delay = 0.01  # about 2 s for the file: the second process starts while the first downloads
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.Popen([sys.executable, "-c", FETCH, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env) for _ in range(2)]
    outs = [r.communicate(timeout=120) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [o[1].decode()[-500:] for o in outs]
    assert outs[0][0] == outs[1][0]
    assert server.hits("/files/other.gguf") == 1  # the second waited, then found the file in the cache
    assert hashlib.sha256(Path(outs[0][0].decode().strip()).read_bytes()).hexdigest() == server.sha["other.gguf"]


def test_not_found_and_not_gguf_are_clear_errors_that_leave_nothing(server, cache):
    with pytest.raises(newrllama.ModelLoadError, match=r"not found \(HTTP 404"):
        newrllama.Model(f"{server.url}/files/missing.gguf")
    with pytest.raises(newrllama.ModelLoadError, match="not a GGUF model file"):
        newrllama.Model(f"{server.url}/files/page.gguf")
    with pytest.raises(newrllama.ModelLoadError, match="cannot download"):
        fetch("http://127.0.0.1:9/nothing-listens-here.gguf")
    assert leftovers(cache) == []


FULL_DISK = """
import resource, signal, sys
from newrllama.download import fetch
from newrllama import ModelLoadError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (3 * 1024 * 1024, resource.RLIM_INFINITY))
try:
    fetch(sys.argv[1])
except ModelLoadError as exc:
    print(exc)
"""


def test_a_full_disk_is_a_clear_error_and_the_download_resumes_later(server, cache):
    url = f"{server.url}/files/small.gguf"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", FULL_DISK, url], capture_output=True, text=True, env=env, timeout=60)
    assert "cannot write the download" in out.stdout and "File too large" in out.stdout, out.stdout + out.stderr
    assert not cached_path(url).exists()
    part = cached_path(url).with_name(cached_path(url).name + ".part")
    kept = part.stat().st_size
    assert 0 < kept <= 3 * 1024 * 1024
    assert hashlib.sha256(Path(fetch(url)).read_bytes()).hexdigest() == server.sha["small.gguf"]
    assert server.requests[-1][1].get("Range") == f"bytes={kept}-"


def test_a_download_larger_than_the_free_space_is_refused_before_writing(server, cache, monkeypatch):
    import shutil as real_shutil
    from newrllama import download
    usage = real_shutil.disk_usage(os.path.dirname(cache) or ".")
    monkeypatch.setattr(download.shutil, "disk_usage", lambda path: usage._replace(free=1024))
    url = f"{server.url}/files/small.gguf"
    with pytest.raises(newrllama.ModelLoadError, match=r"not enough disk space .* 6,291,456 bytes needed, 1,024 free"):
        fetch(url)
    assert not cached_path(url).exists()


def test_hf_addresses_go_through_the_hub_with_its_token_and_checksum(server, cache, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", server.token)
    path = fetch("hf://owner/repo/gated.gguf")
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == server.sha["gated.gguf"]
    hub = [h for p, h in server.requests if p == "/owner/repo/resolve/main/gated.gguf"]
    storage = [h for p, h in server.requests if p == "/cdn/gated.gguf"]
    assert hub[-1].get("Authorization") == f"Bearer {server.token}"
    assert storage and "Authorization" not in storage[-1]  # the token stays with the hub's host
    server.lie = True
    with pytest.raises(newrllama.ModelLoadError, match="the one the hub states"):
        fetch("hf://owner/repo@v2/small.gguf")
    assert leftovers(cache) == sorted([Path(path).name, Path(path).name + ".json"])
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(newrllama.ModelLoadError, match="gated or private: set NEWRLLAMA_HF_TOKEN"):
        fetch("hf://owner/other-repo/gated.gguf")


def test_bad_arguments_are_refused_before_any_request(server):
    before = len(server.requests)
    with pytest.raises(newrllama.InvalidArgumentError, match="64 hexadecimal"):
        newrllama.Model(f"{server.url}/files/small.gguf", sha256="1234")
    with pytest.raises(newrllama.InvalidArgumentError, match="hf://owner/repo/path"):
        newrllama.Model("hf://owner/file.gguf")
    with pytest.raises(newrllama.InvalidArgumentError, match="give it with a URL"):
        newrllama.Model(newrllama.default_model_path(), sha256="ab" * 32)
    assert len(server.requests) == before


def test_the_command_line_takes_a_url(server, cache):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    url = f"{server.url}/files/gemma.gguf"
    prompt = "The capital of Germany is Berlin. The capital of France is"
    out = subprocess.run([sys.executable, "-m", "newrllama", "generate", prompt, "--model", url,
                          "--max-tokens", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert "Paris" in out.stdout and cached_path(url).exists()
