"""The record kept beside a model file, ``<file>.json``: where it came from and its SHA-256, so that
a cached model is hashed once rather than at every load."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict

_BLOCK = 1 << 20


def record_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def read_record(path: Path) -> Dict[str, Any]:
    """The record of ``path``, or {} when there is none (or an unreadable one)."""
    try:
        record = json.loads(record_path(path).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def write_record(path: Path, record: Dict[str, Any]) -> None:
    """Replaces the record of ``path`` at once, so that a reader never sees half of it."""
    final = record_path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(temporary, final)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def discard_record(path: Path) -> None:
    record_path(path).unlink(missing_ok=True)


def hash_of_file(path: Path) -> "hashlib._Hash":
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest


def known_sha256(path: Path) -> str:
    """The SHA-256 of ``path``: the recorded one while the file still has the recorded size, else
    hashed now and recorded."""
    record = read_record(path)
    size = path.stat().st_size
    if record.get("sha256") and record.get("size") == size:
        return str(record["sha256"])
    sha256 = hash_of_file(path).hexdigest()
    try:
        write_record(path, {**record, "sha256": sha256, "size": size})
    except OSError:
        pass  # a cache this process cannot write to is hashed at every load instead
    return sha256
