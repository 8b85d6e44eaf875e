"""The build refuses a missing llama-cpp-python; the import refuses a libllama other than the one built against."""
from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from newrllama._lib import library_problem
from helpers import repo_modules

ROOT = repo_modules.ROOT


def test_library_problem_names_each_mismatch():
    pinned = repo_modules.llama_cpp_python_version()
    good = (pinned, pinned, "/x/lib/libllama.so.0", "/x/lib", "abc", "abc")
    assert library_problem(*good) is None
    assert "0.3.35 is installed" in library_problem("0.3.35", *good[1:])
    assert "built against the libllama in /x/lib" in library_problem(*good[:2], "/y/lib/libllama.so.0", *good[3:])
    assert "changed since the shim was built" in library_problem(*good[:4], "abd", "abc")


def test_build_without_llama_cpp_python_is_a_clear_error(tmp_path):
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # Give the bare environment cffi only (from this one's site-packages), not llama-cpp-python.
    import cffi
    import pycparser
    site = tmp_path / "site"
    site.mkdir()
    for module in (cffi, pycparser):
        shutil.copytree(Path(module.__file__).parent, site / Path(module.__file__).parent.name)
    for so in Path(cffi.__file__).parent.parent.glob("_cffi_backend*.so"):
        shutil.copy(so, site)
    run = subprocess.run([str(python), str(ROOT / "capi_shim" / "build.py")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(site)}, cwd=tmp_path, timeout=120)
    assert run.returncode != 0
    assert "llama-cpp-python is not installed" in run.stderr and "AMX" in run.stderr


def test_progress_bar_is_shown(model, capsys):
    import newrllama
    with newrllama.Context(model, n_ctx=512, n_seq_max=2, n_threads=2) as ctx:
        ctx.generate_parallel(["Hello", "World"], newrllama.SamplingParams(max_tokens=2), progress=True)
    assert "2/2" in capsys.readouterr().err


if sys.platform != "linux":  # pragma: no cover
    pytest.skip("the shim is built for Linux", allow_module_level=True)
