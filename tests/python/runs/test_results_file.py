"""The results file a run writes as prompts finish and resumes from: no model, no Ray (the runs that write it are
tested in runs/test_recorded_run.py and doors/test_cluster.py)."""
from __future__ import annotations

import json

import pytest

import newrllama
from newrllama.models.model_hash import ModelIdentity
from newrllama.runs.results_file import ResultsFile
from helpers.results_lines import lines_of


def test_results_file_cuts_a_torn_line_and_refuses_foreign_files(tmp_path):
    model = ModelIdentity("/models/m.gguf", "ab" * 32)
    path = tmp_path / "r.jsonl"
    good = [{"index": 0, "text": "a", "input_sha256": "d0", "model_sha256": model.sha256},
            {"index": 1, "text": "b", "input_sha256": "d1", "model_sha256": model.sha256}]
    # The torn line is longer than the result written after it: kept and written over, its tail would remain.
    torn = b'{"index": 2, "text": "' + b"a long answer cut by the kill " * 8
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in good) + torn)
    f = ResultsFile(path, True, {0: "d0", 1: "d1", 2: "d2"}, model)
    try:
        assert set(f.done) == {0, 1}
        with pytest.raises(newrllama.InvalidArgumentError, match="being written by another run"):
            ResultsFile(path, True, {0: "d0", 1: "d1", 2: "d2"}, model)
        f.append([{"index": 2, "text": "c", "input_sha256": "d2", "model_sha256": model.sha256}])
    finally:
        f.close()
    assert [r["index"] for r in lines_of(path)] == [0, 1, 2]
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    with pytest.raises(newrllama.InvalidArgumentError, match="not a result of newrllama"):
        ResultsFile(foreign, True, {0: "d0"}, model)
    assert foreign.read_text() == "my notes\n"
    with pytest.raises(newrllama.InvalidArgumentError, match="cannot open"):
        ResultsFile(tmp_path / "no" / "dir.jsonl", False, {}, model)


def test_results_file_takes_the_last_line_of_a_prompt_run_again_after_an_error(tmp_path):
    model = ModelIdentity("/models/m.gguf", "ab" * 32)
    path = tmp_path / "r.jsonl"
    lines = [{"index": 0, "text": "", "error": "too long", "input_sha256": "d0", "model_sha256": model.sha256},
             {"index": 1, "text": "b", "error": None, "input_sha256": "d1", "model_sha256": model.sha256},
             {"index": 0, "text": "a", "error": None, "input_sha256": "d0", "model_sha256": model.sha256}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    f = ResultsFile(path, True, {0: "d0", 1: "d1"}, model)
    f.close()
    assert f.done == {0: lines[2], 1: lines[1]}
    with open(path, "a") as out:  # a prompt whose answer was fine is never run again: a second one is foreign
        out.write(json.dumps(lines[1]) + "\n")
    with pytest.raises(newrllama.InvalidArgumentError, match="holds prompt 1 twice"):
        ResultsFile(path, True, {0: "d0", 1: "d1"}, model)
