"""Shows that the tests have teeth: applies each named breaking change of tests/breakage/ to a clean tree and runs
the test that must catch it, which must fail.

For the breakages asked for (all by default; or those whose name or number starts with an argument), it

1. makes a git worktree of HEAD in a temporary folder, with this checkout's compiled C shim copied in, and any test
   file the catalog names that HEAD does not hold yet copied from this checkout (a test written with its breakage,
   not committed yet);
2. runs every named test once on that unpatched tree: they must pass, or a failure later would mean nothing;
3. for each breakage: resets the worktree (git checkout -- . and git clean), applies the patch, rebuilds what it
   touches (the C shim; ggml's CPU library for a patch of capi_shim/llama_cpp_patch, from the pinned
   llama-cpp-python source, about a minute; the R package, into a temporary R library), runs the test with the
   worktree's code first on the path, and reports CAUGHT (the test failed) or MISSED, with the seconds it took.
   A run that errs otherwise (a collection error, a timeout, a build that fails) is reported as ERROR, which is
   not a catch.

Python runs with this checkout's .venv (PYTHONPATH=<worktree>/python_core, so the worktree's newrllama is the one
imported: the log shows newrllama.__file__ once); R with R_LIBS=<temporary library>:<checkout>/.Rlib and
NEWRLLAMA_PYTHON set to that Python. Exit status 0 only when every baseline run passed and every breakage was
caught. Nothing in this checkout is changed (the worktree's metadata aside, removed at the end).

    .venv/bin/python scripts/check_breakage.py                 # every breakage (about 15 minutes on 2 cores)
    .venv/bin/python scripts/check_breakage.py 05 18-stream    # some of them
    .venv/bin/python scripts/check_breakage.py --skip-slow-build   # all but the one that rebuilds llama.cpp
    .venv/bin/python scripts/check_breakage.py --list
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
BREAKAGE = ROOT / "tests" / "breakage"
CATALOG = BREAKAGE / "catalog.json"
TEST_TIMEOUT_S = 1200
BUILD_TIMEOUT_S = 1800
PRODUCT_DIRS = ("capi_shim/", "python_core/", "r_package/R/", "r_package/DESCRIPTION", "r_package/NAMESPACE")


def say(text: str = "") -> None:
    print(text, flush=True)


def run(cmd: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None, timeout: float = TEST_TIMEOUT_S,
        check: bool = False) -> Tuple[int, str, float]:
    """Runs cmd; returns its exit status (124 on a timeout), its output (stdout and stderr) and its seconds."""
    t0 = time.monotonic()
    try:
        done = subprocess.run(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=timeout)
        rc, out = done.returncode, done.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc, out = 124, out + f"\n[check_breakage] timed out after {timeout:.0f} s"
    if check and rc != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed (exit {rc}):\n{tail(out, 40)}")
    return rc, out, time.monotonic() - t0


def tail(text: str, n: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


def clip(line: str, width: int = 320) -> str:
    return line if len(line) <= width else line[:width] + " ..."


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the catalog ------------------------------------------------------------------------------------------------

def load_catalog() -> List[dict]:
    entries = json.loads(CATALOG.read_text())["breakages"]
    for e in entries:
        if not (BREAKAGE / f"{e['patch']}.patch").is_file():
            raise SystemExit(f"check_breakage: {e['patch']}.patch is in the catalog but not in {BREAKAGE}")
    return entries


def select(entries: List[dict], names: Sequence[str], skip_slow_build: bool) -> List[dict]:
    chosen = [e for e in entries if not names or any(e["patch"].startswith(n) for n in names)]
    unknown = [n for n in names if not any(e["patch"].startswith(n) for e in entries)]
    if unknown:
        raise SystemExit(f"check_breakage: no breakage starts with {', '.join(unknown)} (see --list)")
    if skip_slow_build:
        chosen = [e for e in chosen if not e.get("slow_build")]
    return chosen


def test_files(entry: dict) -> List[str]:
    return sorted({t.split("::")[0] for t in entry["tests"]}) if entry["kind"] == "pytest" else []


# ---- the worktree -----------------------------------------------------------------------------------------------

class Tree:
    """A git worktree of HEAD with what a test run needs that git does not hold."""

    def __init__(self, base: Path, python: str, entries: List[dict]) -> None:
        self.path = base / "tree"
        self.base = base
        self.python = python
        self.entries = entries
        run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(self.path), "HEAD"], ROOT,
            check=True, timeout=300)
        self.shims = sorted((ROOT / "python_core" / "newrllama").glob("_capi*.so"))
        if not self.shims:
            raise SystemExit("check_breakage: no compiled shim (python_core/newrllama/_capi*.so) in this checkout: "
                             "run scripts/setup.sh first")
        self.copied_tests = [f for e in entries for f in test_files(e)
                             if not (self.path / f).exists() and (ROOT / f).exists()]
        self.copied_tests = sorted(set(self.copied_tests))
        self.refresh()

    def refresh(self) -> None:
        """Back to HEAD, with the compiled shim and the uncommitted test files copied in."""
        run(["git", "-C", str(self.path), "checkout", "--", "."], self.path, check=True)
        run(["git", "-C", str(self.path), "clean", "-fdq"], self.path, check=True)
        for so in self.shims:
            shutil.copy2(so, self.path / "python_core" / "newrllama" / so.name)
        for f in self.copied_tests:
            (self.path / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, self.path / f)

    def apply(self, patch: Path) -> List[str]:
        """Applies a patch; returns the files it changes (product code only, or it is refused)."""
        rc, out, _ = run(["git", "apply", "--numstat", str(patch)], self.path, check=True)
        files = [line.split("\t")[2] for line in out.splitlines() if line.count("\t") >= 2]
        outside = [f for f in files if not f.startswith(PRODUCT_DIRS)]
        if outside:
            raise RuntimeError(f"{patch.name} changes files outside the product code: {', '.join(outside)}")
        run(["git", "apply", str(patch)], self.path, check=True)
        return files

    def remove(self) -> None:
        run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.path)], ROOT, timeout=300)
        run(["git", "-C", str(ROOT), "worktree", "prune"], ROOT, timeout=300)


# ---- builds -----------------------------------------------------------------------------------------------------

def build_shim(tree: Tree) -> str:
    """The C shim compiled in the worktree, in place (setup.py's cffi build)."""
    rc, out, dt = run([tree.python, "setup.py", "-q", "build_ext", "--inplace"], tree.path, timeout=BUILD_TIMEOUT_S)
    if rc != 0:
        raise RuntimeError(f"the shim did not build:\n{tail(out, 30)}")
    return f"C shim rebuilt in the worktree ({dt:.0f} s)"


def install_r(tree: Tree, rlib: Path) -> str:
    rlib.mkdir(parents=True, exist_ok=True)
    rc, out, dt = run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(rlib), str(tree.path / "r_package")],
                      tree.path, env=r_env(tree, rlib), timeout=BUILD_TIMEOUT_S)
    if rc != 0:
        raise RuntimeError(f"R CMD INSTALL failed:\n{tail(out, 30)}")
    _, found, _ = run(["Rscript", "-e", 'cat(find.package("newrllama"))'], tree.path, env=r_env(tree, rlib))
    return f"r_package installed into {rlib} ({dt:.0f} s); R finds newrllama in {found.strip()}"


class LlamaCppBuilder:
    """ggml's CPU library (where newrllama's kernels live) built from the pinned llama-cpp-python source with a
    tree's capi_shim/llama_cpp_patch applied, as scripts/build_llama_cpp.py builds the wheel (its CMAKE_ARGS,
    Release), but only the ggml-cpu target; then an overlay of the installed llama_cpp package (its Python
    files, headers, libraries and dist-info) with that library in place of the installed one. Put first on
    PYTHONPATH, the overlay is the llama.cpp the tests find (capi_shim/build.py's llama_cpp_location(), which
    test_quantized_matmul.py compiles its check against); the shim itself keeps its own libllama.

    The source is extracted and configured once; each build rewrites only the files whose patched text changed
    (so a later build recompiles the kernel's file alone)."""

    def __init__(self, base: Path, python: str) -> None:
        self.base = base / "llama-cpp"
        self.python = python
        self.cache = Path(os.environ.get("NEWRLLAMA_CACHE_DIR") or Path.home() / ".cache" / "newrllama") / "breakage"
        info = subprocess.run([python, "-c", (
            "import importlib.util, importlib.metadata as m, json\n"
            "d = m.distribution('llama-cpp-python')\n"
            "print(json.dumps({'package': importlib.util.find_spec('llama_cpp').origin, 'version': d.version,"
            " 'dist_info': str(d._path)}))")], capture_output=True, text=True, check=True)
        found = json.loads(info.stdout)
        self.package = Path(found["package"]).parent
        self.version = found["version"]
        self.dist_info = Path(found["dist_info"])
        self.source: Optional[Path] = None
        self.pristine: Dict[Path, str] = {}
        self.build = self.base / "build"

    def source_archive(self) -> Path:
        self.cache.mkdir(parents=True, exist_ok=True)
        name = f"llama_cpp_python-{self.version}.tar.gz"
        if not (self.cache / name).exists():
            run([self.python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d",
                 str(self.cache), f"llama-cpp-python=={self.version}"], self.cache, check=True, timeout=BUILD_TIMEOUT_S)
        return self.cache / name

    def _prepare(self, tree: Tree) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        with tarfile.open(self.source_archive()) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(self.base, filter="data")
            else:
                tar.extractall(self.base)
        self.source = next(p for p in self.base.glob("llama_cpp_python-*") if p.is_dir())
        builder = load_module("newrllama_build_llama_cpp_breakage", tree.path / "scripts" / "build_llama_cpp.py")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        run(["cmake", "-S", str(self.source), "-B", str(self.build), *generator, "-DCMAKE_BUILD_TYPE=Release",
             "-DLLAVA_BUILD=OFF", *builder.cmake_args("none")], self.base, check=True, timeout=BUILD_TIMEOUT_S)

    def _patch_sources(self, tree: Tree, tag: str) -> List[str]:
        """The vendored llama.cpp as the tree's apply.py patches it, from the pristine text of every file it edits;
        returns the files rewritten."""
        patch = load_module(f"newrllama_llama_cpp_patch_{tag}", tree.path / "capi_shim" / "llama_cpp_patch" / "apply.py")
        root = self.source / "vendor" / "llama.cpp"
        texts: Dict[Path, str] = {}
        for p in patch.PATCHES:
            if p.source not in self.pristine:
                self.pristine[p.source] = (root / p.source).read_text()
            texts[p.source] = p.patched(texts.get(p.source, self.pristine[p.source]))
        written = []
        for rel, text in texts.items():
            if (root / rel).read_text() != text:
                (root / rel).write_text(text)
                written.append(str(rel))
        return written

    def overlay(self, tree: Tree, tag: str) -> Tuple[Path, str]:
        t0 = time.monotonic()
        if self.source is None:
            self._prepare(tree)
        written = self._patch_sources(tree, tag)
        run(["cmake", "--build", str(self.build), "--target", "ggml-cpu", "-j", str(os.cpu_count() or 2)], self.base,
            check=True, timeout=BUILD_TIMEOUT_S)
        built = next(p for p in self.build.rglob("libggml-cpu.so.*") if not p.is_symlink())
        overlay = self.base / f"overlay-{tag}"
        shutil.rmtree(overlay, ignore_errors=True)
        overlay.mkdir()
        shutil.copytree(self.package, overlay / "llama_cpp", symlinks=True)
        shutil.copytree(self.package.parent / "include", overlay / "include", symlinks=True)
        shutil.copytree(self.dist_info, overlay / self.dist_info.name, symlinks=True)
        # Every name of the library: a wheel installs libggml-cpu.so, .so.0 and .so.0.x.y as copies, not links, and
        # the dynamic loader takes the .so.0 (its soname).
        targets = sorted(p for p in (overlay / "llama_cpp" / "lib").iterdir() if p.name.startswith("libggml-cpu.so"))
        if not targets:
            raise RuntimeError("the installed llama_cpp has no libggml-cpu.so to replace")
        for target in targets:
            target.unlink()
            shutil.copy2(built, target)
        data = built.read_bytes()
        kernels = sorted({m.decode() for m in re.findall(rb"newrllama-llama-cpp-patch: ([A-Za-z0-9_-]+)", data)})
        return overlay, (f"ggml-cpu built from llama-cpp-python {self.version} with this tree's llama.cpp patches "
                         f"({', '.join(kernels)}; rewritten: {', '.join(written) or 'nothing'}), sha256 "
                         f"{hashlib.sha256(data).hexdigest()[:12]}, in place of {', '.join(p.name for p in targets)} "
                         f"in the overlay {overlay} ({time.monotonic() - t0:.0f} s)")


# ---- running the tests ------------------------------------------------------------------------------------------

def py_env(tree: Tree, rlib: Path, overlay: Optional[Path] = None) -> Dict[str, str]:
    env = dict(os.environ)
    paths = ([str(overlay)] if overlay else []) + [str(tree.path / "python_core")]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NEWRLLAMA_PYTHON"] = tree.python
    env["R_LIBS"] = os.pathsep.join([str(rlib), str(ROOT / ".Rlib")])
    return env


def r_env(tree: Tree, rlib: Path) -> Dict[str, str]:
    return py_env(tree, rlib)


def llama_cpp_seen(tree: Tree, env: Dict[str, str]) -> str:
    """Where the tests find llama.cpp's libraries with this environment (as capi_shim/build.py looks)."""
    _, out, _ = run([tree.python, "-c", "import importlib.util, os; "
                     "print(os.path.join(os.path.dirname(importlib.util.find_spec('llama_cpp').origin), 'lib'))"],
                    tree.path, env=env)
    return f"the tests find llama.cpp's libraries in {out.strip()}"


def pytest_cmd(tree: Tree, tests: Sequence[str]) -> List[str]:
    return [tree.python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", "--tb=line", *tests]


def testthat_cmd(filters: Sequence[str]) -> List[str]:
    pattern = "|".join(filters)
    return ["Rscript", "-e",
            f'testthat::test_local("r_package", filter = "{pattern}", reporter = "summary", '
            'load_package = "installed", stop_on_failure = TRUE)']


def run_tests(tree: Tree, kind: str, tests: Sequence[str], env: Dict[str, str]) -> Tuple[int, str, float]:
    cmd = pytest_cmd(tree, tests) if kind == "pytest" else testthat_cmd(tests)
    return run(cmd, tree.path, env=env)


def failed_tests(kind: str, rc: int, out: str) -> bool:
    """Whether the run ended with failing tests (and not with an error of another kind)."""
    if kind == "pytest":
        return rc == 1 and bool(re.search(r"\b\d+ failed\b", out))
    return rc not in (0, 124) and "══ Failed" in out


def failure_lines(kind: str, out: str, limit: int = 14) -> List[str]:
    """What a reader needs to see that the test failed for the breakage: pytest's one-line failures and summary,
    testthat's failure reports."""
    lines = out.splitlines()
    if kind == "pytest":
        keep = [l for l in lines if re.match(r"^(FAILED|ERROR) ", l) or re.match(r"^/\S+:\d+: ", l)]
        summary = [l for l in lines if re.search(r"\b(passed|failed|error|errors|skipped)\b.* in [\d.]+s", l)]
        return [clip(l) for l in keep[:limit]] + [clip(l) for l in summary[-1:]]
    start = next((i for i, l in enumerate(lines) if l.startswith("══ Failed")), None)
    picked = lines[start:start + 2 * limit] if start is not None else lines[-limit:]
    return [clip(l) for l in picked if l.strip()][:2 * limit]


def summary_line(kind: str, out: str) -> str:
    if kind == "pytest":
        found = [l for l in out.splitlines() if re.search(r" in [\d.]+s", l) and re.search(r"passed|failed|error", l)]
        return found[-1].strip("= ") if found else tail(out, 1)
    found = [l for l in out.splitlines() if l.startswith("══ DONE") or l.startswith("══ Skipped") or "DONE" in l]
    return found[-1] if found else tail(out, 1)


def show(lines: Sequence[str], indent: str = "      ") -> None:
    for l in lines:
        say(indent + l)


# ---- main -------------------------------------------------------------------------------------------------------

def baseline(tree: Tree, entries: List[dict], rlib: Path, llama: Optional[LlamaCppBuilder]) -> bool:
    say("== Baseline: every named test on the unpatched tree (must pass)")
    ok = True
    groups: List[Tuple[str, str, List[str], Optional[Path]]] = []
    normal = [t for e in entries if e["kind"] == "pytest" and e["build"] != "llama_cpp" for t in e["tests"]]
    if normal:
        groups.append(("pytest", "pytest, the Python tests", list(dict.fromkeys(normal)), None))
    if any(e["build"] == "r" for e in entries):
        say("   " + install_r(tree, rlib))
        filters = [t for e in entries if e["kind"] == "testthat" for t in e["tests"]]
        groups.append(("testthat", "testthat, the R tests", list(dict.fromkeys(filters)), None))
    slow = [t for e in entries if e["build"] == "llama_cpp" for t in e["tests"]]
    if slow and llama is not None:
        overlay, note = llama.overlay(tree, "baseline")
        say("   " + note)
        say("   " + llama_cpp_seen(tree, py_env(tree, rlib, overlay)))
        groups.append(("pytest", "pytest against ggml-cpu built from the unpatched tree", list(dict.fromkeys(slow)),
                       overlay))
    for kind, what, tests, overlay in groups:
        rc, out, dt = run_tests(tree, kind, tests, py_env(tree, rlib, overlay))
        passed = rc == 0
        ok &= passed
        say(f"   {'PASS' if passed else 'FAIL'}  {what}: {len(tests)} test{'s' if len(tests) != 1 else ''} "
            f"({dt:.0f} s) -- {summary_line(kind, out)}")
        if not passed:
            show(failure_lines(kind, out, 30) if rc != 124 else [tail(out, 5)])
    return ok


def check(tree: Tree, entry: dict, rlib: Path, llama: Optional[LlamaCppBuilder]) -> Tuple[str, float, str]:
    t0 = time.monotonic()
    tree.refresh()
    patch = BREAKAGE / f"{entry['patch']}.patch"
    say(f"== {entry['patch']}  [{entry['layer']}; {entry['lane']} lane]")
    say(f"   bug: {entry['bug']}")
    overlay = None
    try:
        files = tree.apply(patch)
        say(f"   patched: {', '.join(files)}")
        if entry["build"] == "shim":
            say("   " + build_shim(tree))
        elif entry["build"] == "r":
            say("   " + install_r(tree, rlib))
        elif entry["build"] == "llama_cpp":
            if llama is None:
                raise RuntimeError("llama.cpp builds are off")
            overlay, note = llama.overlay(tree, entry["patch"][:2])
            say("   " + note)
            say("   " + llama_cpp_seen(tree, py_env(tree, rlib, overlay)))
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        say(f"   the patch could not be applied or built: {exc}")
        return "ERROR", time.monotonic() - t0, "apply/build failed"
    tests = entry["tests"]
    say(f"   runs: {' '.join(tests) if entry['kind'] == 'pytest' else 'testthat filter ' + '|'.join(tests)}")
    rc, out, _ = run_tests(tree, entry["kind"], tests, py_env(tree, rlib, overlay))
    if failed_tests(entry["kind"], rc, out):
        verdict = "CAUGHT"
    elif rc == 0:
        verdict = "MISSED"
    else:
        verdict = "ERROR"
    show(failure_lines(entry["kind"], out) if verdict != "MISSED" else [summary_line(entry["kind"], out)])
    dt = time.monotonic() - t0
    say(f"   => {verdict} ({dt:.0f} s)")
    return verdict, dt, summary_line(entry["kind"], out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="breakages to check (a name or number prefix); default: all")
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--skip-slow-build", action="store_true",
                        help="leave out the breakages that rebuild llama.cpp's CPU library (about a minute each)")
    parser.add_argument("--keep", action="store_true", help="keep the worktree and builds (their folder is printed)")
    parser.add_argument("--list", action="store_true", help="list the breakages and exit")
    args = parser.parse_args(argv)
    entries = select(load_catalog(), args.names, args.skip_slow_build)
    if args.list:
        for e in entries:
            say(f"{e['patch']:48} {e['layer']:34} {e['lane']:8} {' '.join(e['tests'])}")
        return 0
    if not Path(args.python).exists():
        raise SystemExit(f"check_breakage: no Python at {args.python}: run scripts/setup.sh first")
    t_start = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="newrllama-breakage-"))
    rlib = base / "Rlib"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    say(f"check_breakage: {len(entries)} breakage{'s' if len(entries) != 1 else ''} against HEAD {head}, "
        f"in {base}")
    tree = Tree(base, args.python, entries)
    try:
        env = py_env(tree, rlib)
        rc, where, _ = run([args.python, "-c", "import newrllama; print(newrllama.__file__)"], tree.path, env=env)
        say(f"   Python: {args.python}; PYTHONPATH={env['PYTHONPATH']}")
        say(f"   newrllama.__file__ = {where.strip()}")
        if rc != 0 or not where.strip().startswith(str(tree.path)):
            say("   the worktree's newrllama is not the one imported: nothing below would mean anything")
            return 2
        if tree.copied_tests:
            say(f"   copied from this checkout (not in HEAD yet): {', '.join(tree.copied_tests)}")
        llama = LlamaCppBuilder(base, args.python) if any(e["build"] == "llama_cpp" for e in entries) else None
        baseline_ok = baseline(tree, entries, rlib, llama)
        results = []
        for entry in entries:
            results.append((entry, *check(tree, entry, rlib, llama)))
        say()
        say(f"== Summary (HEAD {head}; baseline {'passed' if baseline_ok else 'FAILED'})")
        say(f"   {'breakage':48} {'layer':34} {'lane':8} {'result':7} seconds")
        for entry, verdict, dt, _ in results:
            say(f"   {entry['patch']:48} {entry['layer']:34} {entry['lane']:8} {verdict:7} {dt:5.0f}")
        caught = sum(v == "CAUGHT" for _, v, _, _ in results)
        say(f"   {caught} of {len(results)} caught; total {time.monotonic() - t_start:.0f} s")
        if args.keep:
            say(f"   kept: {base}")
        return 0 if baseline_ok and caught == len(results) else 1
    finally:
        if not args.keep:
            tree.remove()
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
