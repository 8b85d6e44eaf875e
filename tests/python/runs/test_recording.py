"""Recording: a run's output file, ids and resume settings, checked when made, before anything runs."""
from __future__ import annotations

import pytest

import newrllama


def test_a_recording_without_a_file_writes_nothing():
    assert not newrllama.Recording().writes
    assert not newrllama.Recording(ids=["a", "b"]).writes
    assert newrllama.Recording("out.jsonl").writes


@pytest.mark.parametrize("kwargs, message", [
    ({"output": 3}, "output must be a file path, got int"),
    ({"output": "out.jsonl", "resume": "yes"}, "resume must be True or False"),
    ({"output": "out.jsonl", "resume": True, "retry_errors": 1}, "retry_errors must be True or False"),
    ({"output": "out.jsonl", "retry_errors": True}, "give it with resume=True"),
    ({"resume": True}, "needs an output file"),
])
def test_a_recording_that_cannot_run_is_refused_when_made(kwargs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.Recording(**kwargs)


def test_the_calls_refuse_the_same_settings_before_any_model_runs(tmp_path):
    # annotate() builds its Recording before it loads a model: the refusal costs nothing.
    with pytest.raises(newrllama.InvalidArgumentError, match="needs an output file"):
        newrllama.annotate(["a text"], ["yes", "no"], resume=True, model=str(tmp_path / "no-such-model.gguf"))
