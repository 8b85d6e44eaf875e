"""Figures in the documentation come from the committed results files, through bench/report.py, and nowhere else."""
from __future__ import annotations

import json
import re

import pytest

from helpers import repo_modules
from helpers.doc_pages import DOCS, ROOT, doc_pages


def _bench_module(name: str):
    return repo_modules.load(f"bench/{name}.py", f"newrllama_bench_{name}")


report = _bench_module("report")
bench_results = _bench_module("bench_results")


def prose_pages():
    """README and the hand-written pages (not the generated benchmarks page)."""
    return [p for p in doc_pages() if p.name != "benchmarks.md"]


def test_the_benchmarks_page_is_what_report_py_makes_of_the_committed_files():
    expected = "\n".join(report.page()).rstrip("\n") + "\n"
    assert (DOCS / "benchmarks.md").read_text() == expected, \
        "docs/benchmarks.md is stale: run .venv/bin/python bench/report.py --page > docs/benchmarks.md"


def test_every_results_file_has_a_section_that_names_its_file_and_code():
    text = (DOCS / "benchmarks.md").read_text()
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert f"### {path.stem}\n" in text
        assert f"File `bench/results/{path.name}`: commit " in text


def test_the_readme_table_of_figures_is_report_py_headline():
    block = "\n".join(report.headline())
    assert block in (ROOT / "README.md").read_text(), \
        "README's table of figures is stale: paste the output of .venv/bin/python bench/report.py --headline"


def test_no_table_of_figures_outside_the_generated_ones():
    headline = set(report.headline())
    decimal = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.])")  # 0.94, 11.3; not a version such as 1.3.239
    stray = [f"{page.relative_to(ROOT)}: {line}" for page in prose_pages() for line in page.read_text().splitlines()
             if line.startswith("|") and decimal.search(line) and line not in headline]
    assert not stray, "table rows with figures that bench/report.py did not make:\n" + "\n".join(stray)


def test_the_headline_links_point_at_sections_of_the_benchmarks_page():
    text = (DOCS / "benchmarks.md").read_text()
    for anchor in re.findall(r"\(docs/benchmarks\.md#([a-z0-9-]+)\)", "\n".join(report.headline())):
        assert any(re.sub(r"[^a-z0-9-]", "", line[4:].lower()) == anchor
                   for line in text.splitlines() if line.startswith("### ")), anchor


def test_headline_figures_come_only_from_files_that_record_their_commit(tmp_path):
    results = ROOT / "bench" / "results"
    for path in results.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    newest = max(tmp_path.glob("parallel-*.json"), key=lambda p: report._date_and_rerun(p))
    later = tmp_path / "parallel-2099-01-01-CPU.json"  # newer, but its commit was not recorded
    record = json.loads(newest.read_text())
    record["machine"].pop("commit")
    record["machine"]["committed_with"] = "0" * 40
    later.write_text(json.dumps(record))
    assert newest.stem in "\n".join(report.headline(tmp_path)) and later.stem not in "\n".join(report.headline(tmp_path))


def test_the_headline_keeps_cpu_kinds_of_one_name_apart_and_drops_an_older_file_of_unknown_kind(tmp_path):
    results = ROOT / "bench" / "results"
    for path in results.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    record = json.loads((results / "parallel-2026-12-03-AMD-EPYC.json").read_text())
    machine = {k: v for k, v in record["machine"].items() if k != "cpu_kind"}
    for day, kind in (("01", None), ("02", "AVX2"), ("03", "AVX-512 VNNI")):
        record["machine"] = {**machine, "cpu": "Zen"} | ({"cpu_kind": kind} if kind else {})
        (tmp_path / f"parallel-2099-01-{day}-Zen.json").write_text(json.dumps(record))
    rows = [row for row in report.headline(tmp_path) if "Zen" in row]
    assert len(rows) == 2
    assert any("Zen (AVX2)" in row and "parallel-2099-01-02-Zen" in row for row in rows)
    assert any("Zen (AVX-512 VNNI)" in row and "parallel-2099-01-03-Zen" in row for row in rows)


def test_a_rerun_writes_a_new_file_and_records_commit_command_machine_and_time(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "RESULTS", tmp_path)
    first = bench_results.write_results("unit", {"figure": 1})
    second = bench_results.write_results("unit", {"figure": 2})
    assert first != second and second.name.endswith("-2.json")
    assert json.loads(first.read_text())["figure"] == 1  # the earlier run is kept as it was
    machine = json.loads(second.read_text())["machine"]
    assert {"commit", "command", "cpu", "cpu_kind", "time"} <= set(machine)
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", machine["commit"])


def test_a_file_of_an_unknown_kind_is_refused(tmp_path):
    stray = tmp_path / "mystery-2026-01-01-CPU.json"
    stray.write_text(json.dumps({"machine": {}}))
    with pytest.raises(ValueError, match="no report for"):
        report.page(tmp_path)
