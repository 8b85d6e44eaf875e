"""The records of a JSON Lines results file (of a Context or a Cluster run), as the tests read them."""
import json

import pytest

import newrllama


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def assert_recorded_run_refusals(run, prompts, params, out, tmp_path):
    """A recorded run's bad arguments are refused, the same on a Context and a Cluster (``run`` is either's
    generate_parallel), and a refusal writes nothing: ``out`` holds the first two prompts' lines after it."""
    run(prompts[:2], params, output=out)
    refused = [
        (dict(output=out), "already holds results"),
        (dict(output=out, resume=True, params=newrllama.SamplingParams(max_tokens=params.max_tokens + 1)),
         "was run with other settings"),
        (dict(resume=True), "needs an output file"),
        (dict(ids=["x"], output=tmp_path / "other.jsonl"), "ids has 1 entries"),
        (dict(ids=["x", "x"], output=tmp_path / "other.jsonl"), "more than once"),
    ]
    for kwargs, match in refused:
        call_prompts = kwargs.pop("prompts", prompts[:2])
        call_params = kwargs.pop("params", params)
        with pytest.raises(newrllama.InvalidArgumentError, match=match):
            run(call_prompts, call_params, **kwargs)
    assert len(lines_of(out)) == 2, "a refused run writes nothing"
