"""The llama-cpp-python version is written once, in pyproject.toml's dependency pin, and read from there."""
from __future__ import annotations

import subprocess

import pytest

from helpers import repo_modules

pin = repo_modules.load("capi_shim/llama_cpp_pin.py", "newrllama_llama_cpp_pin")
# Files that run or build code; recorded results and test data keep the version they were made with.
CODE_SUFFIXES = (".py", ".sh", ".R", ".c", ".h", ".cpp", ".toml", ".cfg", ".yml", ".yaml")


def test_the_builds_and_scripts_read_the_pin():
    version = pin.llama_cpp_python_version()
    assert repo_modules.load("capi_shim/build.py", "newrllama_shim_build").LLAMA_CPP_PYTHON_VERSION == version
    assert repo_modules.load("scripts/build_llama_cpp.py", "build_llama_cpp").LLAMA_CPP_PYTHON == \
        f"llama-cpp-python=={version}"
    printed = subprocess.run(["python3", str(pin.__file__)], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == version


def test_no_other_code_file_writes_the_version():
    version = pin.llama_cpp_python_version()
    tracked = subprocess.run(["git", "ls-files"], cwd=repo_modules.ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    writers = [path for path in tracked if path.endswith(CODE_SUFFIXES) and path != "pyproject.toml"
               and version in (repo_modules.ROOT / path).read_text(encoding="utf-8", errors="replace")]
    assert writers == [], f"{writers} write llama-cpp-python's version {version}; read capi_shim/llama_cpp_pin.py"


@pytest.mark.parametrize("text, found", [("[project]\ndependencies = []\n", 0),
                                         ('a = ["llama-cpp-python==0.3.1"]\nb = ["llama-cpp-python==0.3.2"]\n', 2)])
def test_a_missing_or_doubled_pin_is_a_clear_error(tmp_path, text, found):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(RuntimeError, match=f"exactly once.*found {found} pins"):
        pin.llama_cpp_python_version(tmp_path / "pyproject.toml")
