"""Models from URLs and hf:// addresses, against a real HTTP server on loopback that stands in for the hub."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import newrllama
from newrllama.models.download import cached_path, fetch
from helpers.model_server import ModelServer
from helpers.small_gguf import UNKNOWN_TYPE, small_gguf

SMALL = 6 * 1024 * 1024
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub")
    small = folder / "small.gguf"
    small.write_bytes(small_gguf(SMALL))
    page = folder / "page.gguf"
    page.write_bytes(b"<!doctype html><title>Log in</title>" * 10)
    short = folder / "short.gguf"
    short.write_bytes(small.read_bytes()[:-1000])
    unknown = folder / "unknown.gguf"
    unknown.write_bytes(small_gguf(SMALL, tensor_type=UNKNOWN_TYPE))
    s = ModelServer({"gemma.gguf": Path(newrllama.default_model_path()), "small.gguf": small, "other.gguf": small,
                     "page.gguf": page, "gated.gguf": small, "short.gguf": short, "unknown.gguf": unknown})
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
    server.send_length, server.send_etag = True, True
    return tmp_path / "cache"


def leftovers(cache):
    models = cache / "models"
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) if models.exists() else []


def part_of(url):
    return cached_path(url).with_name(cached_path(url).name + ".part")


def sha_of(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def served(server, tmp_path, name, content):
    """Serves ``content`` as ``name`` (a file of this test's own, so it may change)."""
    path = tmp_path / f"served-{len(server.requests)}-{name}"
    path.write_bytes(content)
    server.replace(name, path)
    return f"{server.url}/files/{name}"


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


def test_a_body_cut_without_a_length_is_not_taken_for_whole(server, cache):
    url = f"{server.url}/files/small.gguf"
    server.send_length, server.cut_after = False, 2 * MiB  # the connection closes as if the body had ended
    with pytest.raises(newrllama.ModelLoadError, match=f"cut at {2 * MiB} of {SMALL} bytes; load it again to resume"):
        fetch(url)
    assert not cached_path(url).exists() and part_of(url).stat().st_size == 2 * MiB
    server.cut_after = None
    assert sha_of(fetch(url)) == server.sha["small.gguf"]
    assert server.requests[-1][1].get("Range") == f"bytes={2 * MiB}-"


def test_a_resumed_body_without_a_length_is_measured_by_its_content_range(server, cache):
    url = f"{server.url}/files/unknown.gguf"  # its header cannot tell its size: only the server's total can
    server.cut_after = 2 * MiB
    with pytest.raises(newrllama.ModelLoadError, match="load it again to resume"):
        fetch(url)
    server.send_length, server.cut_after = False, 1 * MiB
    with pytest.raises(newrllama.ModelLoadError, match=f"cut at {3 * MiB} of {SMALL} bytes; load it again to resume"):
        fetch(url)
    assert not cached_path(url).exists() and part_of(url).stat().st_size == 3 * MiB


def test_a_file_cut_short_on_the_server_is_refused_by_its_gguf_header(server, cache):
    url = f"{server.url}/files/short.gguf"
    with pytest.raises(newrllama.ModelLoadError,
                       match=f"cut short on the server: its GGUF header needs {SMALL} bytes but the file has "
                             f"{SMALL - 1000}; the download was deleted"):
        fetch(url)
    assert leftovers(cache) == []


def test_with_no_length_and_no_checksum_an_unsizable_file_waits_for_a_checksum(server, cache):
    url = f"{server.url}/files/unknown.gguf"
    server.send_length = False
    with pytest.raises(newrllama.ModelLoadError, match=r"cannot tell whether .* is whole: .* again with sha256="):
        fetch(url)
    assert not cached_path(url).exists() and part_of(url).stat().st_size == SMALL
    path = fetch(url, sha256=server.sha["unknown.gguf"])  # the kept part is whole: the server answers 416
    assert server.requests[-1][1].get("Range") == f"bytes={SMALL}-"
    assert sha_of(path) == server.sha["unknown.gguf"]
    assert leftovers(cache) == sorted([cached_path(url).name, cached_path(url).name + ".json"])


def cut_then_complete(server, url, tail):
    """A download cut at 2 MiB, then ``tail`` appended to its part (as by a process that stopped
    after the last byte, before the rename)."""
    server.cut_after = 2 * MiB
    with pytest.raises(newrllama.ModelLoadError, match="load it again to resume"):
        fetch(url)
    server.cut_after = None
    with open(part_of(url), "ab") as part:
        part.write(tail)


def test_a_whole_part_left_before_its_rename_is_checked_and_finished(server, cache):
    url = f"{server.url}/files/small.gguf"
    cut_then_complete(server, url, Path(server.files["small.gguf"]).read_bytes()[2 * MiB:])
    before = server.hits("/files/small.gguf")
    assert sha_of(fetch(url)) == server.sha["small.gguf"]
    assert server.hits("/files/small.gguf") == before + 1
    assert server.requests[-1][1].get("Range") == f"bytes={SMALL}-"
    assert leftovers(cache) == sorted([cached_path(url).name, cached_path(url).name + ".json"])


def test_a_whole_part_with_the_wrong_checksum_is_deleted(server, cache):
    url = f"{server.url}/files/small.gguf"
    cut_then_complete(server, url, os.urandom(SMALL - 2 * MiB))
    with pytest.raises(newrllama.ModelLoadError, match=r"not .* \(the one asked for\); it was deleted"):
        fetch(url, sha256=server.sha["small.gguf"])
    assert leftovers(cache) == []


def test_a_part_longer_than_the_file_is_dropped_and_the_download_starts_over(server, cache):
    url = f"{server.url}/files/small.gguf"
    cut_then_complete(server, url, Path(server.files["small.gguf"]).read_bytes()[2 * MiB:] + b"extra")
    assert sha_of(fetch(url)) == server.sha["small.gguf"]
    assert [h.get("Range") for _, h in server.requests[-2:]] == [f"bytes={SMALL + 5}-", None]


def test_a_file_that_changed_on_the_server_is_downloaded_from_the_start(server, cache, tmp_path):
    url = served(server, tmp_path, "changing.gguf", small_gguf(SMALL))
    server.cut_after = 2 * MiB
    with pytest.raises(newrllama.ModelLoadError, match="load it again to resume"):
        fetch(url)
    old_etag = f'"{server.sha["changing.gguf"][:16]}"'
    served(server, tmp_path, "changing.gguf", small_gguf(SMALL))
    server.cut_after = None
    assert sha_of(fetch(url)) == server.sha["changing.gguf"]  # not the old file's first 2 MiB and the new rest
    assert server.requests[-1][1].get("If-Range") == old_etag


def cut_without_validator(server, tmp_path):
    """A download with sha256= cut after 2 MiB by a server that sends no ETag: (url, sha256)."""
    url = served(server, tmp_path, "plain.gguf", small_gguf(SMALL))
    sha = server.sha["plain.gguf"]
    server.send_etag, server.cut_after = False, 2 * MiB
    with pytest.raises(newrllama.ModelLoadError, match="load it again to resume"):
        fetch(url, sha256=sha)
    return url, sha


def test_with_a_checksum_a_download_without_validator_resumes_and_is_checked(server, cache, tmp_path):
    url, sha = cut_without_validator(server, tmp_path)
    server.cut_after = None
    assert sha_of(fetch(url, sha256=sha)) == sha
    assert server.requests[-1][1].get("Range") == f"bytes={2 * MiB}-"
    assert "If-Range" not in server.requests[-1][1]


def test_with_a_checksum_a_resumed_download_of_a_changed_file_is_deleted(server, cache, tmp_path):
    url, sha = cut_without_validator(server, tmp_path)
    served(server, tmp_path, "plain.gguf", small_gguf(SMALL))
    server.cut_after = None
    with pytest.raises(newrllama.ModelLoadError, match=f"has SHA-256 [0-9a-f]{{64}}, not {sha} "
                                                       r"\(the one asked for\); it was deleted"):
        fetch(url, sha256=sha)
    assert server.requests[-1][1].get("Range") == f"bytes={2 * MiB}-"
    assert leftovers(cache) == []


def test_without_checksum_or_validator_a_cut_download_starts_over(server, cache):
    url = f"{server.url}/files/small.gguf"
    server.send_etag, server.cut_after = False, 2 * MiB
    with pytest.raises(newrllama.ModelLoadError, match="load it again to download it anew .* pass sha256="):
        fetch(url)
    server.cut_after = None
    assert sha_of(fetch(url)) == server.sha["small.gguf"]
    assert "Range" not in server.requests[-1][1]


FETCH = "import sys; from newrllama.models.download import fetch; print(fetch(sys.argv[1]))"


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
from newrllama.models.download import fetch
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
    from newrllama.models import download
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


@pytest.mark.slow
def test_the_command_line_takes_a_url(server, cache):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    url = f"{server.url}/files/gemma.gguf"
    prompt = "The capital of Germany is Berlin. The capital of France is"
    out = subprocess.run([sys.executable, "-m", "newrllama", "generate", prompt, "--model", url,
                          "--max-tokens", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert "Paris" in out.stdout and cached_path(url).exists()
