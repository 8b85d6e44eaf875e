"""The same prompts and parameters through the C one-shot, the Python API and the R API give the same texts."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import newrllama
from newrllama._capi import ffi, lib

pytestmark = pytest.mark.slow  # starts R: the fast lane (-m "not slow") leaves it out

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    "The capital of Germany is Berlin. The capital of Italy is Rome. The capital of France is",
    "1, 2, 3, 4,",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The chemical symbol for gold is",
]
N_SEQ_MAX = 4


@pytest.fixture(scope="module")
def model():
    with newrllama.Model() as m:
        yield m


def c_one_shot(model, max_tokens, temperature, seed):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=N_SEQ_MAX, n_threads=2) as ctx:
        params = ffi.new("struct newrllama_parallel_params *", [max_tokens, 40, 1.0, temperature, 0, 1.0, seed])
        c_prompts = [ffi.new("char[]", p.encode()) for p in PROMPTS]
        results = ffi.new("char ***")
        err = ffi.new("const char **")
        code = lib.newrllama_generate_parallel(ctx.handle, ffi.new("const char *[]", c_prompts), len(PROMPTS),
                                               params, results, err)
        assert code == lib.NEWRLLAMA_OK
        try:
            return [ffi.string(results[0][i]).decode() for i in range(len(PROMPTS))]
        finally:
            lib.newrllama_free_string_array(results[0], len(PROMPTS))


def python_api(model, max_tokens, temperature, seed):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=N_SEQ_MAX, n_threads=2) as ctx:
        params = newrllama.SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed)
        return [c.text for c in ctx.generate_parallel(PROMPTS, params)]


def r_api(tmp_path, max_tokens, temperature, seed):
    if shutil.which("Rscript") is None or not (ROOT / ".Rlib" / "newrllama").exists():
        pytest.skip("R or the installed R package (.Rlib, made by scripts/setup.sh) is missing")
    prompts_file = tmp_path / "prompts.json"
    prompts_file.write_text(json.dumps(PROMPTS))
    out_file = tmp_path / "out.json"
    env = dict(os.environ, NEWRLLAMA_PYTHON=sys.executable, R_LIBS=str(ROOT / ".Rlib"))
    run = subprocess.run(["Rscript", str(Path(__file__).with_name("same_texts.R")), str(prompts_file), str(out_file),
                          str(max_tokens), str(temperature), str(seed), str(N_SEQ_MAX)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out_file.read_text())


@pytest.mark.parametrize("temperature,seed", [(0.0, 1234), (0.9, 7)])
def test_c_python_and_r_agree(model, tmp_path, temperature, seed):
    c_texts = c_one_shot(model, 16, temperature, seed)
    py_texts = python_api(model, 16, temperature, seed)
    r_texts = r_api(tmp_path, 16, temperature, seed)
    assert c_texts == py_texts == r_texts
    assert "Paris" in py_texts[0]


def _fields(path: Path) -> dict:
    text = path.read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^([\w/@.]+):\s*((?:.*\n?(?:[ \t]+.*\n?)*))", text, re.M)}


def test_top_level_description_is_consistent_with_the_package():
    top = _fields(ROOT / "DESCRIPTION")
    pkg = _fields(ROOT / "r_package" / "DESCRIPTION")
    names = lambda field: {re.sub(r"\s*\(.*\)", "", d).strip() for d in field.split(",") if d.strip()}  # noqa: E731
    assert names(pkg["Imports"]) <= names(top["Imports"])
    assert names(pkg["Suggests"]) <= names(top["Suggests"])
    assert top["Config/testthat/edition"].strip() == pkg["Config/testthat/edition"].strip()
