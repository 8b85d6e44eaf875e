"""A model file's identity: its SHA-256, computed once per version of the file and kept in the cache.

Hashing a model reads every byte of it (hundreds of megabytes even for the embedded model), so the
digest is kept. A file newrllama keeps itself (a download, the embedded model) has it in its own record
beside it (file_record.py). Any other file gets a record in the cache, ``<cache>/sha256/<digest of
the path>.json``, with the file's absolute path, size and modification time, never beside the
user's file: a file that changed (another size or mtime) is hashed again."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .embedded import cache_dir
from ..errors import ModelLoadError
from .file_record import hash_of_file, known_sha256, read_record, write_record


@dataclass(frozen=True)
class ModelIdentity:
    """A model file and the SHA-256 of its bytes: what a results file records of the model that wrote it."""

    path: str
    sha256: str


def identify(path: str) -> ModelIdentity:
    """The identity of the model file at ``path``, hashed only when no record knows this version of it."""
    absolute = Path(os.path.abspath(path))
    try:
        stat = absolute.stat()
    except OSError as exc:
        raise ModelLoadError(f"cannot read the model file {absolute}: {exc.strerror}") from None
    if absolute.parent in (cache_dir().absolute(), (cache_dir() / "models").absolute()):
        return ModelIdentity(str(absolute), known_sha256(absolute))
    version = {"path": str(absolute), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    key = hashlib.sha256(str(absolute).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    stand_in = cache_dir() / "sha256" / key  # its record is <key>.json
    record = read_record(stand_in)
    if all(record.get(k) == v for k, v in version.items()) and isinstance(record.get("sha256"), str):
        return ModelIdentity(str(absolute), record["sha256"])
    sha256 = hash_of_file(absolute).hexdigest()
    try:
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        write_record(stand_in, {**version, "sha256": sha256})
    except OSError:
        pass  # a cache this process cannot write to costs hashing again next time
    return ModelIdentity(str(absolute), sha256)
