"""Runs the README's test command (or its fast lane) and reports where the time goes: seconds per part (setup, model
fetches, testthat, R CMD check, the site, pytest), per test file, and the model loads of every process, counted.

    .venv/bin/python scripts/profile_tests.py            # the whole command: bash scripts/test.sh
    .venv/bin/python scripts/profile_tests.py --fast     # the fast lane: bash scripts/test.sh --fast
    .venv/bin/python scripts/profile_tests.py --report   # only rewrite tests/PROFILE.md from tests/profile/*.json

Each run writes tests/profile/<lane>.json, then tests/PROFILE.md is written again from every such file. Commit
both when the suite changes. The command's own exit status is passed on: a failing run is still profiled.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "tests" / "profile"
REPORT = ROOT / "tests" / "PROFILE.md"
PART = re.compile(r"^== (.+) \(at (\d+) s\)$")
TOP_FILES = 25


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def run_command(lane: str, reports: Path) -> Tuple[int, List[Tuple[str, float]], float, float]:
    """Runs the lane's command, echoing its output; returns its status, the parts with their start, the time it
    started and the total seconds."""
    command = ["bash", str(ROOT / "scripts" / "test.sh")] + (["--fast"] if lane == "fast" else [])
    env = dict(os.environ, NEWRLLAMA_TEST_REPORTS=str(reports),
               NEWRLLAMA_MODEL_LOAD_LOG=str(reports / "loads.jsonl"))
    parts: List[Tuple[str, float]] = []
    started = time.time()
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            match = PART.match(line.rstrip("\n"))
            if match:
                parts.append((match.group(1), time.time() - started))
    return process.returncode, parts, started, time.time() - started


def part_seconds(parts: List[Tuple[str, float]], total: float) -> Dict[str, float]:
    ends = [at for _, at in parts[1:]] + [total]
    return {name: round(end - at, 1) for (name, at), end in zip(parts, ends)}


def junit_cases(path: Path) -> List[Dict]:
    """Every test case of a JUnit file: its file, name, seconds, and whether it was skipped or failed."""
    if not path.exists():
        return []
    cases = []
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            file = case.get("file") or case.get("classname") or suite.get("name") or "?"
            if path.stem == "testthat":  # testthat names the suite after the file, without its folder
                file = f"r_package/tests/testthat/test-{suite.get('name')}.R"
            elif not case.get("file"):  # pytest names the class path: tests.python.engine.test_x(.Class)
                dotted = [p for p in (case.get("classname") or "").split(".") if p]
                while dotted and not dotted[-1].startswith("test_"):
                    dotted.pop()
                file = "/".join(dotted) + ".py" if dotted else file
            outcome = ("skipped" if case.find("skipped") is not None else
                       "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
            cases.append({"file": file, "name": case.get("name"), "seconds": float(case.get("time") or 0),
                          "outcome": outcome})
    return cases


def loads_by_file(log: Path, parts: List[Tuple[str, float]], epoch: float) -> Tuple[Counter, Counter]:
    """Model loads per test file (pytest's, from the test that was running; else the part of the command they fell
    in) and per model file."""
    per_test_file, per_model = Counter(), Counter()
    if not log.exists():
        return per_test_file, per_model
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        per_model[entry["file"]] += 1
        if entry["test"]:
            per_test_file[entry["test"].split("::")[0]] += 1
        else:
            at = entry["at"] - epoch
            per_test_file["(" + next((name for name, start in reversed(parts) if start <= at), "?") + ")"] += 1
    return per_test_file, per_model


def profile(lane: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp)
        status, parts, epoch, total = run_command(lane, reports)
        cases = [dict(case, runner=name) for name in ("testthat", "docs-code", "pytest")
                 for case in junit_cases(reports / f"{name}.xml")]
        loads, models = loads_by_file(reports / "loads.jsonl", parts, epoch)
    files: Dict[str, Dict] = defaultdict(lambda: {"seconds": 0.0, "tests": 0, "skipped": 0, "failed": 0})
    for case in cases:
        entry = files[case["file"]]
        entry["seconds"] = round(entry["seconds"] + case["seconds"], 2)
        entry["tests"] += 1
        entry["skipped"] += case["outcome"] == "skipped"
        entry["failed"] += case["outcome"] == "failed"
    for name, count in loads.items():
        files[name]["loads"] = count
    result = {"lane": lane, "date": datetime.date.today().isoformat(), "cpu": cpu_name(), "cores": os.cpu_count(),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip(),
              "exit_status": status, "total_seconds": round(total, 1), "parts": part_seconds(parts, total),
              "tests": len(cases), "model_loads": sum(models.values()), "loads_per_model": dict(models),
              "files": dict(sorted(files.items(), key=lambda kv: -kv[1]["seconds"]))}
    PROFILES.mkdir(parents=True, exist_ok=True)
    (PROFILES / f"{lane}.json").write_text(json.dumps(result, indent=1) + "\n")
    write_report()
    return status


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(round(seconds % 60)):02d}s"


def write_report() -> None:
    lines = ["# Where the test command's time goes", "",
             "Written by `scripts/profile_tests.py` from `tests/profile/*.json`; run it again when the suite "
             "changes. Seconds per part of the command, per test file (a file's module fixtures, model loads "
             "included, count towards its first test), and the model loads of every process the command started.",
             ""]
    for path in sorted(PROFILES.glob("*.json")):
        p = json.loads(path.read_text())
        lines += [f"## {'Fast lane' if p['lane'] == 'fast' else 'Whole command'}: {minutes(p['total_seconds'])}",
                  "", f"{p['date']}, commit {p['commit']}, {p['cpu']}, {p['cores']} cores; exit status "
                  f"{p['exit_status']}; {p['tests']} tests; {p['model_loads']} model loads "
                  f"({', '.join(f'{n} {f}' for f, n in sorted(p['loads_per_model'].items(), key=lambda kv: -kv[1]))}).",
                  "", "| part | seconds |", "|---|---:|"]
        lines += [f"| {name} | {seconds:.0f} |" for name, seconds in p["parts"].items()]
        lines += ["", f"The {TOP_FILES} slowest test files:", "",
                  "| file | seconds | tests | skipped | model loads |", "|---|---:|---:|---:|---:|"]
        for name, f in list(p["files"].items())[:TOP_FILES]:
            lines.append(f"| `{name}` | {f['seconds']:.0f} | {f['tests']} | {f['skipped']} | {f.get('loads', 0)} |")
        lines.append("")
    REPORT.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fast", action="store_true", help="profile the fast lane, not the whole command")
    group.add_argument("--report", action="store_true", help="only write tests/PROFILE.md from tests/profile/")
    args = parser.parse_args()
    if args.report:
        write_report()
        return 0
    return profile("fast" if args.fast else "full")


if __name__ == "__main__":
    sys.exit(main())
