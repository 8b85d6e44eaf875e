"""Model files from the web: an http(s) URL or hf://owner/repo/path/file.gguf, fetched once into the cache.

A download goes into ``<name>.part`` and is renamed to its final name only once it is
complete, starts like a GGUF file and has the expected SHA-256 (the caller's, else the one
the hub states in ``X-Linked-Etag``), so a final name never holds a broken file. A cut
download resumes with an HTTP Range request (guarded by If-Range, so a file that changed on
the server starts over). A lock file serialises processes that fetch the same URL: the
second one waits and then finds the file in the cache. A cached file is used without any
request. The hub's token goes only to the hub's own host, never to the host a redirect
leads to (its storage)."""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

from .embedded import cache_dir
from .errors import InvalidArgumentError, ModelLoadError
from .file_record import discard_record, hash_of_file, known_sha256, read_record, write_record

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

HF_ENDPOINT = "https://huggingface.co"
GGUF_MAGIC = b"GGUF"
_BLOCK = 1 << 20
_MAX_REDIRECTS = 10
_TIMEOUT_S = 60
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def is_remote(spec: str) -> bool:
    return spec.startswith(("http://", "https://", "hf://"))


@dataclass(frozen=True)
class Source:
    url: str
    token: Optional[str]  # sent to the URL's own host only


def resolve(spec: str) -> Source:
    """The URL (and token) of an http(s) URL or of hf://owner/repo[@revision]/path/file.gguf."""
    if not spec.startswith("hf://"):
        return Source(spec, None)
    parts = spec[len("hf://"):].split("/")
    if len(parts) < 3 or not all(parts):
        raise InvalidArgumentError(f"{spec!r}: an hf:// address is hf://owner/repo/path/to/file.gguf "
                                   "(or hf://owner/repo@revision/path/to/file.gguf)")
    repo, _, revision = parts[1].partition("@")
    endpoint = (os.environ.get("NEWRLLAMA_HF_ENDPOINT") or HF_ENDPOINT).rstrip("/")
    quoted = "/".join(urllib.parse.quote(p) for p in parts[2:])
    url = f"{endpoint}/{urllib.parse.quote(parts[0])}/{urllib.parse.quote(repo)}/resolve/" \
          f"{urllib.parse.quote(revision or 'main', safe='')}/{quoted}"
    return Source(url, os.environ.get("NEWRLLAMA_HF_TOKEN") or os.environ.get("HF_TOKEN") or None)


def cached_path(url: str) -> Path:
    """Where the file of ``url`` is kept: the cache's models folder, the file's name after a digest of the URL."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]) or "model.gguf"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-120:]
    return cache_dir() / "models" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name}"


def fetch(spec: str, sha256: Optional[str] = None, progress: Optional[bool] = None) -> str:
    """The local path of the model at ``spec`` (downloaded on first use); see the module's doc."""
    if sha256 is not None:
        if not isinstance(sha256, str) or not _SHA256.match(sha256.lower()):
            raise InvalidArgumentError(f"sha256 must be 64 hexadecimal digits, got {sha256!r}")
        sha256 = sha256.lower()
    source = resolve(spec)
    target = cached_path(source.url)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target.with_name(target.name + ".lock")):
            if not target.exists():  # another process may have fetched it while this one waited
                show = sys.stderr.isatty() if progress is None else bool(progress)
                _download(spec, source, target, sha256, show)
    _check_cached(target, sha256)
    return str(target)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def _check_cached(target: Path, sha256: Optional[str]) -> None:
    if sha256 is None:
        return
    recorded = known_sha256(target)
    if recorded != sha256:
        raise ModelLoadError(f"the cached model {target} has SHA-256 {recorded}, not the {sha256} asked for; "
                             "delete it to download again")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # redirects are followed by _open, which drops the token
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _open(spec: str, source: Source, headers: Dict[str, str]) -> Tuple[object, Optional[str]]:
    """The response at the end of the redirects, and the SHA-256 the hub stated on the way (or None)."""
    url, stated = source.url, None
    origin = urllib.parse.urlsplit(source.url).netloc
    for _ in range(_MAX_REDIRECTS):
        sent = dict(headers)
        if source.token and urllib.parse.urlsplit(url).netloc == origin:
            sent["Authorization"] = f"Bearer {source.token}"
        try:
            response = _OPENER.open(urllib.request.Request(url, headers=sent), timeout=_TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            linked = (exc.headers.get("X-Linked-Etag") or "").strip('"').lower()
            stated = linked if _SHA256.match(linked) else stated
            if exc.code in (301, 302, 303, 307, 308) and exc.headers.get("Location"):
                url = urllib.parse.urljoin(url, exc.headers["Location"])
                continue
            raise _http_error(spec, url, exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ModelLoadError(f"cannot download {spec}: {reason}") from None
        linked = (response.headers.get("X-Linked-Etag") or "").strip('"').lower()
        return response, linked if _SHA256.match(linked) else stated
    raise ModelLoadError(f"cannot download {spec}: more than {_MAX_REDIRECTS} redirects")


def _http_error(spec: str, url: str, exc: urllib.error.HTTPError) -> ModelLoadError:
    if exc.code in (401, 403):
        hint = ("it is gated or private: set NEWRLLAMA_HF_TOKEN (or HF_TOKEN) to a token that has access"
                if spec.startswith("hf://") else "the server refused access")
        return ModelLoadError(f"cannot download {spec}: HTTP {exc.code} ({hint})")
    if exc.code == 404:
        return ModelLoadError(f"cannot download {spec}: not found (HTTP 404 at {url})")
    return ModelLoadError(f"cannot download {spec}: HTTP {exc.code} {exc.reason}")


def _download(spec: str, source: Source, target: Path, sha256: Optional[str], progress: bool) -> None:
    part = target.with_name(target.name + ".part")
    saved = read_record(part)
    offset = part.stat().st_size if part.exists() and saved.get("url") == source.url else 0
    headers = {"User-Agent": "newrllama", "Accept-Encoding": "identity"}
    if offset and saved.get("validator"):
        headers["Range"] = f"bytes={offset}-"
        headers["If-Range"] = saved["validator"]
    else:
        offset = 0
    response, stated = _open(spec, source, headers)
    with response:
        if response.status != 206 or not (response.headers.get("Content-Range") or "").startswith(f"bytes {offset}-"):
            offset = 0  # a full answer: the server ignored the range, or the file changed
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        if length is not None:
            _check_room(part.parent, int(length), spec)
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        write_record(part, {"url": source.url, "validator": validator})
        # The digest follows the bytes as they are written (the kept part first), so the file is read only once.
        digest = hash_of_file(part) if offset else hashlib.sha256()
        written = _receive(spec, response, part, offset, total, digest, progress and target.name.split("-", 1)[1])
    if total is not None and written < total:
        raise ModelLoadError(f"the download of {spec} was cut at {written} of {total} bytes; "
                             "load it again to resume where it stopped")
    _finish(spec, part, target, digest.hexdigest(), sha256 or stated, sha256 is not None)


def _check_room(folder: Path, needed: int, spec: str) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise ModelLoadError(f"not enough disk space for {spec}: {needed:,} bytes needed, {free:,} free in {folder} "
                             "(set NEWRLLAMA_CACHE_DIR to a larger disk)")


def _receive(spec: str, response, part: Path, offset: int, total: Optional[int], digest: "hashlib._Hash",
             progress: Optional[str]) -> int:
    """Appends the body to ``part`` from ``offset``, feeding ``digest``; ``progress`` is the bar's label, or
    empty for no bar."""
    from tqdm.auto import tqdm
    written = offset
    with open(part, "r+b" if offset else "wb") as out, \
            tqdm(total=total, initial=offset, unit="B", unit_scale=True, disable=not progress, desc=progress) as bar:
        out.seek(offset)
        out.truncate()
        while True:
            try:
                block = response.read(_BLOCK)
            except (OSError, http.client.HTTPException) as exc:  # the connection broke: what arrived is kept
                raise ModelLoadError(f"the download of {spec} broke off after {written} bytes ({exc}); "
                                     "load it again to resume where it stopped") from None
            if not block:
                return written
            if written == 0 and not block.startswith(GGUF_MAGIC[: len(block)]):
                out.close()
                _discard(part)
                raise ModelLoadError(f"{spec} is not a GGUF model file (it starts with {block[:16]!r})")
            try:
                out.write(block)
            except OSError as exc:
                raise ModelLoadError(f"cannot write the download of {spec} to {part}: {exc.strerror}; "
                                     f"the {written} bytes received are kept, and loading it again resumes") from None
            digest.update(block)
            written += len(block)
            bar.update(len(block))


def _finish(spec: str, part: Path, target: Path, actual: str, expected: Optional[str], asked: bool) -> None:
    with open(part, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        _discard(part)
        raise ModelLoadError(f"{spec} is not a GGUF model file (it starts with {head!r})")
    if expected is not None and actual != expected:
        _discard(part)
        whose = "the one asked for" if asked else "the one the hub states"
        raise ModelLoadError(f"the download of {spec} has SHA-256 {actual}, not {expected} ({whose}); "
                             "it was deleted")
    write_record(target, {"url": spec, "sha256": actual, "size": part.stat().st_size})
    os.replace(part, target)
    discard_record(part)


def _discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    discard_record(part)
