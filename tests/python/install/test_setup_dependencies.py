"""scripts/setup.sh installs the Python packages by name (the package itself goes in without its dependencies, so
that pip never rebuilds llama-cpp-python from source); its list must hold every requirement pyproject.toml names
for the package, its tests, its server and its documentation."""
from __future__ import annotations

import re

from helpers import repo_modules

EXTRAS_SETUP_INSTALLS = ("test", "server", "cluster", "plot", "docs")
BUILT_APART = {"llama-cpp-python"}  # scripts/build_llama_cpp.py builds it for this CPU


def _requirements(pyproject: str) -> set:
    body = pyproject[pyproject.index("dependencies = ["):pyproject.index("[tool.setuptools]")]
    wanted = re.findall(r'^\s*(?:(\w+) = \[)?(.*)$', body, flags=re.M)
    names = set()
    for extra, rest in wanted:
        if extra and extra not in EXTRAS_SETUP_INSTALLS and extra != "dependencies":
            continue
        names |= set(re.findall(r'"([^"]+)"', rest.split("#")[0]))
    return names


def test_setup_installs_every_requirement_pyproject_names():
    pyproject = (repo_modules.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    setup = (repo_modules.ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    installed = set(re.findall(r'"([A-Za-z][^"\s]*[<>=][^"]*)"', setup))
    needed = {r for r in _requirements(pyproject) if re.split(r"[<>=\[]", r)[0] not in BUILT_APART}
    assert "pandas>=1.5" in needed and "fastapi>=0.110" in needed and "cffi>=1.16" in needed
    assert needed - installed == set(), f"scripts/setup.sh does not install {sorted(needed - installed)}"
