"""Model files from the web: an http(s) URL or hf://owner/repo/path/file.gguf, fetched once into the cache.

A download goes into ``<name>.part`` and is renamed to its final name only once it is whole,
so a final name never holds a cut or broken file. Whole means: starts like a GGUF file, is as
long as the server announced (Content-Length, else the total of Content-Range), and has the
expected SHA-256 when one is known (the caller's, else the one the hub states in
``X-Linked-Etag``). Without a checksum it must also be as long as its own GGUF header says (the
end of its last tensor's data): that is what tells a cut body from a whole one when a server
announces no length. When not even the header can tell (a tensor type this version does not
know) and the server announced no length, the part is kept and the error asks for ``sha256=``.

A cut download resumes with an HTTP Range request, guarded by If-Range with the server's ETag
or Last-Modified, so a file that changed on the server comes whole from the start; when the
server gives neither, it resumes only with the caller's ``sha256``, which is checked at the end
(a mismatch deletes the part). A part that is already whole (the server answers 416) is checked
and renamed. A lock file serialises processes that fetch the same URL: the second one waits and
then finds the file in the cache. A cached file is used without any request. The hub's token
goes only to the hub's own host, never to the host a redirect leads to (its storage)."""
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
from ..errors import InvalidArgumentError, ModelLoadError
from .file_record import discard_record, hash_of_file, known_sha256, read_record, write_record
from .gguf_size import required_size

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
        with locked(target.with_name(target.name + ".lock")):
            if not target.exists():  # another process may have fetched it while this one waited
                _download(spec, source, target, sha256, shows_progress(progress))
    _check_cached(target, sha256)
    return str(target)


def shows_progress(progress: Optional[bool]) -> bool:
    """A download's bar: as asked, else when stderr is a terminal."""
    return sys.stderr.isatty() if progress is None else bool(progress)


@contextmanager
def locked(path: Path) -> Iterator[None]:
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
            if exc.code == 416 and "Range" in headers:  # nothing past the kept part: the caller finishes it
                return exc, stated
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


_RESUME = "load it again to resume where it stopped"
_RESTART = ("load it again to download it anew (the server gives no ETag or Last-Modified to resume by: "
            "pass sha256= to resume instead)")


@dataclass
class _Part:
    """What the ``.part`` file holds after a request."""
    written: int            # bytes in it
    total: Optional[int]    # the file's size as the server announced it; None when it did not
    digest: "hashlib._Hash"
    advice: str             # what loading again does with it: _RESUME or _RESTART


def _download(spec: str, source: Source, target: Path, sha256: Optional[str], progress: bool) -> None:
    part = target.with_name(target.name + ".part")
    got, stated = _fetch_part(spec, source, part, sha256, progress and target.name.split("-", 1)[1])
    _finish(spec, part, target, got, sha256 or stated, sha256 is not None)


def _fetch_part(spec: str, source: Source, part: Path, sha256: Optional[str],
                progress: Optional[str]) -> Tuple[_Part, Optional[str]]:
    """Fills ``part`` (resuming it when it can); also returns the SHA-256 the hub stated, or None."""
    saved = read_record(part)
    offset = part.stat().st_size if part.exists() and saved.get("url") == source.url else 0
    headers = {"User-Agent": "newrllama", "Accept-Encoding": "identity"}
    # A kept part is continued only where a splice of two versions of the file would show: If-Range
    # makes the server send a changed file whole, and without it the caller's checksum is checked at the end.
    if offset and (saved.get("validator") or sha256):
        headers["Range"] = f"bytes={offset}-"
        if saved.get("validator"):
            headers["If-Range"] = saved["validator"]
    else:
        offset = 0
    response, stated = _open(spec, source, headers)
    if response.status == 416:
        response.close()
        size = _size_in(response.headers.get("Content-Range"))
        if size is not None and size != offset:  # the part is longer than the file, so no piece of it
            _discard(part)
            return _fetch_part(spec, source, part, sha256, progress)  # no part, no Range: no 416 again
        return _Part(offset, offset, hash_of_file(part), _RESUME), stated
    with response:
        if response.status != 206 or not (response.headers.get("Content-Range") or "").startswith(f"bytes {offset}-"):
            offset = 0  # a full answer: the server ignored the range, or the file changed
        total = _announced_size(response.headers, offset)
        if total is not None:
            _check_room(part.parent, total - offset, spec)
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        write_record(part, {"url": source.url, "validator": validator})
        advice = _RESUME if validator or sha256 else _RESTART
        # The digest follows the bytes as they are written (the kept part first), so the file is read only once.
        digest = hash_of_file(part) if offset else hashlib.sha256()
        written = _receive(spec, response, part, offset, total, digest, progress, advice)
    return _Part(written, total, digest, advice), stated


def _announced_size(headers, offset: int) -> Optional[int]:
    length = headers.get("Content-Length")
    if length is not None and length.strip().isdigit():
        return offset + int(length)
    return _size_in(headers.get("Content-Range")) if offset else None


def _size_in(content_range: Optional[str]) -> Optional[int]:
    """The file's size in a Content-Range (``bytes 10-99/100``, ``bytes */100``), or None."""
    size = (content_range or "").rpartition("/")[2].strip()
    return int(size) if size.isdigit() else None


def _check_room(folder: Path, needed: int, spec: str) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise ModelLoadError(f"not enough disk space for {spec}: {needed:,} bytes needed, {free:,} free in {folder} "
                             "(set NEWRLLAMA_CACHE_DIR to a larger disk)")


def _receive(spec: str, response, part: Path, offset: int, total: Optional[int], digest: "hashlib._Hash",
             progress: Optional[str], advice: str) -> int:
    """Appends the body to ``part`` from ``offset``, feeding ``digest``; ``progress`` is the bar's label, or
    empty for no bar; ``advice`` ends the error of a broken connection."""
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
                                     f"{advice}") from None
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


def _finish(spec: str, part: Path, target: Path, got: _Part, expected: Optional[str], asked: bool) -> None:
    """Renames ``part`` to ``target`` once it is whole (see the module's doc); else keeps it to resume, or
    deletes it when it can never be right."""
    if got.total is not None and got.written < got.total:
        raise _cut(spec, got.written, got.total, got.advice)
    with open(part, "rb") as f:
        head = f.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        _discard(part)
        raise ModelLoadError(f"{spec} is not a GGUF model file (it starts with {head!r})")
    actual = got.digest.hexdigest()
    if expected is None:
        _check_gguf_length(spec, part, got)
    elif actual != expected:
        _discard(part)
        whose = "the one asked for" if asked else "the one the hub states"
        raise ModelLoadError(f"the download of {spec} has SHA-256 {actual}, not {expected} ({whose}); "
                             "it was deleted")
    write_record(target, {"url": spec, "sha256": actual, "size": got.written})
    os.replace(part, target)
    discard_record(part)


def _check_gguf_length(spec: str, part: Path, got: _Part) -> None:
    """With no checksum, the GGUF header says how long the file must be; see the module's doc."""
    needed = required_size(part)
    if needed is None:
        if got.total is not None:
            return  # the announced length was met, and the header cannot tell more
        raise ModelLoadError(f"cannot tell whether the download of {spec} is whole: the server announced no "
                             "length, and its GGUF header has a tensor or metadata type this version cannot size; "
                             f"load it again with sha256= (the file's SHA-256) to check it (the {got.written} "
                             "bytes received are kept)")
    if got.written >= needed:
        return
    if got.total is None:  # no length announced: the connection may have closed early
        raise _cut(spec, got.written, needed, got.advice)
    _discard(part)
    raise ModelLoadError(f"{spec} is cut short on the server: its GGUF header needs {needed} bytes but the file "
                         f"has {got.total}; the download was deleted")


def _cut(spec: str, written: int, needed: int, advice: str) -> ModelLoadError:
    return ModelLoadError(f"the download of {spec} was cut at {written} of {needed} bytes; {advice}")


def _discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    discard_record(part)
