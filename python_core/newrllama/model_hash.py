"""A model file's identity: its SHA-256, computed once per version of the file and kept in the cache.

Hashing a model reads all of it (about a second for the 250 MB embedded model), so the digest
is kept in a sidecar, ``<cache>/sha256/<digest of the path>.json``, with the file's absolute
path, size and modification time: a file that changed (another size or mtime) is hashed again.
A file downloaded by newrllama already has its digest in the download's own sidecar, which is
used as it is."""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import download
from .embedded import cache_dir
from .errors import ModelLoadError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ModelIdentity:
    """A model file and the SHA-256 of its bytes: what a results file records of the model that wrote it."""

    path: str
    sha256: str


def identify(path: str) -> ModelIdentity:
    """The identity of the model file at ``path``, hashed only when no sidecar knows this version of it."""
    absolute = os.path.abspath(path)
    try:
        stat = os.stat(absolute)
    except OSError as exc:
        raise ModelLoadError(f"cannot read the model file {absolute}: {exc.strerror}") from None
    version = {"path": absolute, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    key = hashlib.sha256(absolute.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    sidecar = cache_dir() / "sha256" / f"{key}.json"
    known = _downloaded_sha256(absolute) or _recorded_sha256(sidecar, version)
    if known is None:
        known = download._hash_of_file(Path(absolute)).hexdigest()
        _record(sidecar, {**version, "sha256": known})
    return ModelIdentity(absolute, known)


def _downloaded_sha256(path: str) -> Optional[str]:
    # Only beside a file of the download folder: elsewhere a "<model>.json" may be anyone's.
    if os.path.dirname(path) != os.path.abspath(cache_dir() / "models"):
        return None
    return _sha256_or_none(download._read_meta(Path(path)).get("sha256"))


def _recorded_sha256(sidecar: Path, version: dict) -> Optional[str]:
    try:
        saved = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or any(saved.get(k) != v for k, v in version.items()):
        return None
    return _sha256_or_none(saved.get("sha256"))


def _sha256_or_none(value: object) -> Optional[str]:
    return value if isinstance(value, str) and _SHA256.match(value) else None


def _record(sidecar: Path, saved: dict) -> None:
    # Written beside and renamed, so that processes hashing the same file at once never read half a sidecar;
    # a cache that cannot be written only costs hashing again next time.
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=".writing-", dir=sidecar.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(saved, f)
            os.replace(partial, sidecar)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    except OSError:
        pass
