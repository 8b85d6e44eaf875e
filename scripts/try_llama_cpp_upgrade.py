"""What an upgrade of the pinned llama-cpp-python would cost: whether newrllama's llama.cpp patches still apply to
another release, and, with --build, whether the patched build passes the kernel tests. Run by hand by a maintainer
(docs/design/developers.md, "Upgrading llama-cpp-python"), not in CI: a build takes 5-15 minutes.

Without --build it downloads the release's source archive (the newest on PyPI unless --version names one) and
prints each patch's anchors (the text of ggml's CPU sources each edit expects, found exactly once where the pinned
release has it): in place, moved (no copy) or ambiguous (several). With --build, where every anchor is in place,
it builds the patched release as setup does (CPU flavour, AMX off) into a fresh virtualenv, installs a clone of
this checkout with the clone's pin set to that release, and runs the kernel and determinism tests there. Nothing
in this checkout or its .venv changes. Exit status: 0 when everything asked for passed, 1 otherwise.

    .venv/bin/python scripts/try_llama_cpp_upgrade.py                    # the newest release's anchors
    .venv/bin/python scripts/try_llama_cpp_upgrade.py --version 0.3.35 --build
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
import venv
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
KERNEL_TESTS = ["tests/python/install/test_llama_cpp_patch.py", "tests/python/engine/test_quantized_matmul.py",
                "tests/python/engine/test_determinism.py"]


sys.path.insert(0, str(ROOT / "scripts"))  # also when a test loads this file by path
import build_llama_cpp as build  # noqa: E402

patch = build.llama_cpp_patch


class AnchorCheck(NamedTuple):
    patch: str
    what: str
    copies: int                         # 1: in place; 0: moved or changed; more: ambiguous


def check_anchors(llama_cpp_root: Path) -> Tuple[AnchorCheck, ...]:
    """How many copies of each patch's anchors (its edits' text and its dispatch function) a llama.cpp source tree
    has, the edits of an earlier patch of the same file applied first, as patch.apply() does."""
    texts = {}
    found = []
    for p in patch.PATCHES:
        source = Path(llama_cpp_root) / p.source
        text = texts.get(p.source, source.read_text() if source.is_file() else "")
        anchors = [(edit.what, edit.old) for edit in p.edits] + [("dispatch function", p.kernel_anchor)]
        found += [AnchorCheck(p.name, what, text.count(old)) for what, old in anchors]
        try:
            texts[p.source] = p.patched(text)
        except patch.PatchError:
            texts[p.source] = text
    return tuple(found)


def newest_release() -> str:
    with urllib.request.urlopen("https://pypi.org/pypi/llama-cpp-python/json", timeout=60) as response:
        return json.load(response)["info"]["version"]


def report_anchors(llama_cpp: Path) -> bool:
    """Prints each anchor's state; True when all are in place."""
    checks = check_anchors(llama_cpp)
    for c in checks:
        state = "in place" if c.copies == 1 else "moved (not found)" if c.copies == 0 else f"ambiguous ({c.copies} copies)"
        print(f"  {c.patch:26} {c.what:30} {state}")
    return all(c.copies == 1 for c in checks)


def pinned_to(pyproject: Path, version: str) -> None:
    """Writes `version` into a clone's one pin."""
    text = pyproject.read_text()
    pyproject.write_text(re.sub(r'"llama-cpp-python==[^"]+"', f'"llama-cpp-python=={version}"', text))


def build_and_test(source: Path, version: str, work: Path) -> bool:
    """Builds the patched release into a virtualenv under `work`, installs a clone of this checkout pinned to it,
    and runs the kernel tests; True when they pass."""
    env = build._clean_env()
    python = str(work / "venv" / "bin" / "python")
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    wheels = work / "wheels"
    flags = build.cmake_args("none")
    print(f"[try] building llama-cpp-python {version}, patched, into {wheels} (CMAKE_ARGS="
          f"{build.cmake_args_text(flags)})", flush=True)
    build._pip(python, "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(wheels), str(source),
               env={**env, "CMAKE_ARGS": build.cmake_args_text(flags)})
    build._pip(python, "install", "-q", "--no-cache-dir", "--find-links", str(wheels), f"llama-cpp-python=={version}",
               env=env)
    clone = work / "newrllama"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    pinned_to(clone / "pyproject.toml", version)
    print(f"[try] installing newrllama from {clone}, pinned to {version}", flush=True)
    # The shim's build reads llama.h and libllama from the environment's llama-cpp-python: no isolated build.
    build._pip(python, "install", "-q", "cffi>=1.16", "setuptools>=77", "wheel", "pytest", env=env)
    build._pip(python, "install", "-q", "--no-build-isolation", "--find-links", str(wheels), str(clone), env=env)
    print(f"[try] running {' '.join(KERNEL_TESTS)}", flush=True)
    return subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *KERNEL_TESTS], cwd=clone,
                          env=env).returncode == 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", help="the llama-cpp-python release to try (default: the newest on PyPI)")
    parser.add_argument("--build", action="store_true", help="also build it and run the kernel tests")
    parser.add_argument("--work", type=Path, help="a folder to keep the download, build and clone in "
                                                  "(default: a temporary one, removed at the end)")
    args = parser.parse_args(argv)
    version = args.version or newest_release()
    pinned = build.LLAMA_CPP_PYTHON.split("==")[1]
    print(f"llama-cpp-python {version} (pinned: {pinned}); newrllama's patches: {patch.NAME}")
    with tempfile.TemporaryDirectory(prefix="newrllama-try-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        source = build.downloaded_source(sys.executable, work / "source", build._clean_env(),
                                         f"llama-cpp-python=={version}")
        in_place = report_anchors(source / "vendor" / "llama.cpp")
        if not args.build:
            return 0 if in_place else 1
        if not in_place:
            print("[try] not built: move the anchors above in capi_shim/llama_cpp_patch/apply.py first")
            return 1
        patch.apply(source / "vendor" / "llama.cpp")
        passed = build_and_test(source, version, work)
        print(f"[try] the kernel tests {'passed' if passed else 'failed'} on llama-cpp-python {version}")
        return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
