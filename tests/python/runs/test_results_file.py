"""The results file a run writes as prompts finish and resumes from: no model, no Ray (the runs that write it are
tested in runs/test_recorded_run.py and doors/test_cluster.py)."""
from __future__ import annotations

import json

import pytest

import newrllama
from newrllama.models.model_hash import ModelIdentity
from newrllama.runs.results_file import ResultsFile, match_records
from helpers.results_lines import lines_of


def test_results_file_cuts_a_torn_line_and_refuses_foreign_files(tmp_path):
    model = ModelIdentity("/models/m.gguf", "ab" * 32)
    path = tmp_path / "r.jsonl"
    good = [{"index": 0, "text": "a", "input_sha256": "d0", "model_sha256": model.sha256},
            {"index": 1, "text": "b", "input_sha256": "d1", "model_sha256": model.sha256}]
    # The torn line is longer than the result written after it: kept and written over, its tail would remain.
    torn = b'{"index": 2, "text": "' + b"a long answer cut by the kill " * 8
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in good) + torn)
    f = ResultsFile(path, True, None, ["d0", "d1", "d2"], ["s"] * 3, model)
    try:
        assert set(f.done) == {0, 1}
        with pytest.raises(newrllama.InvalidArgumentError, match="being written by another run"):
            ResultsFile(path, True, None, ["d0", "d1", "d2"], ["s"] * 3, model)
        f.append([{"index": 2, "text": "c", "input_sha256": "d2", "model_sha256": model.sha256}])
    finally:
        f.close()
    assert [r["index"] for r in lines_of(path)] == [0, 1, 2]
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    with pytest.raises(newrllama.InvalidArgumentError, match="not a result of newrllama"):
        ResultsFile(foreign, True, None, ["d0"], ["s"], model)
    assert foreign.read_text() == "my notes\n"
    with pytest.raises(newrllama.InvalidArgumentError, match="cannot open"):
        ResultsFile(tmp_path / "no" / "dir.jsonl", False, None, [], [], model)


def test_results_file_of_lines_without_their_settings_takes_the_last_line_of_a_prompt_run_again_after_an_error(
        tmp_path):
    """Lines written before they recorded their settings resume by position (or id) and prompt, as they did."""
    model = ModelIdentity("/models/m.gguf", "ab" * 32)
    path = tmp_path / "r.jsonl"
    lines = [{"index": 0, "text": "", "error": "too long", "input_sha256": "d0", "model_sha256": model.sha256},
             {"index": 1, "text": "b", "error": None, "input_sha256": "d1", "model_sha256": model.sha256},
             {"index": 0, "text": "a", "error": None, "input_sha256": "d0", "model_sha256": model.sha256}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    f = ResultsFile(path, True, None, ["d0", "d1"], ["s"] * 2, model)
    f.close()
    assert f.done == {0: lines[2], 1: lines[1]}
    with open(path, "a") as out:  # a prompt whose answer was fine is never run again: a second one is foreign
        out.write(json.dumps(lines[1]) + "\n")
    with pytest.raises(newrllama.InvalidArgumentError, match="holds prompt 1 twice"):
        ResultsFile(path, True, None, ["d0", "d1"], ["s"] * 2, model)


def line(digest, index=0, settings="s", error=None, **extra):
    return {"index": index, "input_sha256": digest, "settings_sha256": settings, "error": error, **extra}


def test_without_ids_a_line_answers_its_prompt_wherever_the_prompt_now_stands():
    records = list(enumerate([line("a", 0), line("b", 1), line("a", 2), line("c", 3, error="too long")], 1))
    # The corpus read back in another order, its identical texts sharing their lines one each, a text gone and a
    # new one added.
    done = match_records("f", records, None, ["b", "new", "a", "c", "a", "a"], ["s"] * 6)
    assert done == {0: records[1][1], 2: records[0][1], 4: records[2][1], 3: records[3][1]}
    # a prompt's result comes before its error, wherever in the file
    retried = records + [(5, line("c", 3))]
    assert match_records("f", retried, None, ["c"], ["s"])[0]["error"] is None


def test_with_ids_a_changed_text_runs_again_and_its_new_line_wins():
    records = list(enumerate([line("a", 0, id="s1"), line("b", 1, id="s2")], 1))
    done = match_records("f", records, ["s2", "s1", "s3"], ["b", "a-edited", "c"], ["s"] * 3)
    assert done == {0: records[1][1]}  # s1's text changed, s3 is new: both run
    again = records + [(3, line("a-edited", 1, id="s1"))]
    assert match_records("f", again, ["s2", "s1"], ["b", "a-edited"], ["s"] * 2) == {0: records[1][1], 1: again[2][1]}
    with pytest.raises(newrllama.InvalidArgumentError, match="holds the prompt with id 's2' twice"):
        match_records("f", again + [(4, line("b", 0, id="s2"))], ["s2", "s1"], ["b", "a-edited"], ["s"] * 2)


def test_a_line_made_with_other_settings_is_refused_whatever_its_prompt():
    records = [(1, line("a")), (2, line("b", settings="other instruction"))]
    for ids in (None, ["x", "y"]):
        with pytest.raises(newrllama.InvalidArgumentError, match="line 2 was run with other settings"):
            match_records("f", records, ids, ["a", "b"], ["s", "s"])
