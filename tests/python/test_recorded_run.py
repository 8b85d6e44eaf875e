"""A long run on one Context writes its answers as they finish and resumes after a crash,
with the cluster's file format and rules (one implementation, newrllama.results_file)."""
import os
import signal
import subprocess
import sys
import time

import pytest

import newrllama
from results_lines import lines_of

PROMPTS = [f"Write a short note about the number {i}:" for i in range(24)]
PARAMS = newrllama.SamplingParams(max_tokens=24)


def test_answers_are_written_as_they_finish_and_a_finished_file_resumes_without_work(ctx, tmp_path):
    out = tmp_path / "run.jsonl"
    ids = [f"note-{i}" for i in range(6)]
    done = ctx.generate_parallel(PROMPTS[:6], PARAMS, ids=ids, output=out)
    assert all(c.finish_reason == "length" and len(c.token_ids) == 24 for c in done)
    records = lines_of(out)
    assert sorted(r["id"] for r in records) == sorted(ids)
    assert {r["id"]: r["text"] for r in records} == {i: c.text for i, c in zip(ids, done)}
    assert all(r["finish_reason"] == "length" and r["n_gen_tokens"] == 24 for r in records)
    steps = ctx.engine_stats().n_steps
    again = ctx.generate_parallel(PROMPTS[:6], PARAMS, ids=ids, output=out, resume=True)
    assert [c.text for c in again] == [c.text for c in done] and all(c.token_ids == [] for c in again)
    assert ctx.engine_stats().n_steps == steps, "nothing was run again"
    assert ctx.last_stats.n_prompts == 0


def test_the_cluster_refusals_hold_on_a_context(ctx, tmp_path):
    out = tmp_path / "run.jsonl"
    ctx.generate_parallel(PROMPTS[:2], PARAMS, output=out)
    with pytest.raises(newrllama.InvalidArgumentError, match="resume=True"):
        ctx.generate_parallel(PROMPTS[:2], PARAMS, output=out)
    with pytest.raises(newrllama.InvalidArgumentError, match="other settings"):
        ctx.generate_parallel(PROMPTS[:2], newrllama.SamplingParams(max_tokens=5), output=out, resume=True)
    with pytest.raises(newrllama.InvalidArgumentError, match="not among the prompts"):
        ctx.generate_parallel(PROMPTS[:1], PARAMS, output=out, resume=True)
    with pytest.raises(newrllama.InvalidArgumentError, match="needs an output file"):
        ctx.generate_parallel(PROMPTS[:2], PARAMS, resume=True)
    with pytest.raises(newrllama.InvalidArgumentError, match="ids"):
        ctx.generate_parallel(PROMPTS[:2], PARAMS, ids=["a", "a"], output=tmp_path / "other.jsonl")
    assert ctx.engine_stats().n_running == 0
    assert len(lines_of(out)) == 2, "a refused run writes nothing"
    assert all(c.finish_reason == "length" for c in ctx.generate_parallel(PROMPTS[:2], PARAMS))


KILLED_RUN = """
import sys, newrllama
with newrllama.Model() as model, newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=1) as ctx:
    print("started", flush=True)
    ctx.generate_parallel([f"Write a short note about the number {i}:" for i in range(24)],
                          newrllama.SamplingParams(max_tokens=24), output=sys.argv[1])
"""


def test_a_run_killed_half_way_resumes_with_every_prompt_once(model, tmp_path):
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(out)], stdout=subprocess.PIPE, env=env)
    try:
        assert run.stdout.readline().strip() == b"started"
        deadline = time.monotonic() + 120
        while not (out.exists() and len(lines_of(out)) >= 4) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    before = lines_of(out)
    assert 0 < len(before) < 24, "the run was killed after its first answers and before its last"
    with open(out, "ab") as f:
        f.write(b'{"index": 23, "text": "torn by the ki')  # a line cut by the kill
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=1) as ctx:
        done = ctx.generate_parallel(PROMPTS, PARAMS, output=out, resume=True)
        assert ctx.last_stats.n_prompts == 24 - len(before)
        fresh = ctx.generate_parallel(PROMPTS, PARAMS)
    records = lines_of(out)
    assert sorted(r["index"] for r in records) == list(range(24))
    assert records[: len(before)] == before
    assert all(c.finish_reason == "length" for c in done)
    for r in before:
        assert done[r["index"]].text == r["text"]
    same = sum(d.text == f.text for d, f in zip(done, fresh))
    assert same >= 22, f"{same} of 24 answers equal a fresh run (batch composition may change a near tie)"


STORIES = ["Texaco agreed to buy Getty Oil for 10 billion dollars.", "OPEC cut its crude output again.",
           "Shell raised its posted crude prices.", "Chevron will acquire Gulf Oil.", None,
           "The bank bought a stake in the brewer.", "Oil output in the North Sea fell."]
LABELS = {"acquisition": "a company buys another", "crude oil": "oil prices or production"}


def test_annotate_writes_labels_and_resumes_only_what_is_missing(model, tmp_path):
    out = tmp_path / "labels.jsonl"
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        first = newrllama.annotate(STORIES[:4], LABELS, "Give the topic.", context=ctx, output=out)
        assert len(lines_of(out)) == 4
        steps = ctx.engine_stats().n_steps
        done = newrllama.annotate(STORIES, LABELS, "Give the topic.", context=ctx, output=out, resume=True)
        assert ctx.engine_stats().n_steps > steps
        steps = ctx.engine_stats().n_steps
        again = newrllama.annotate(STORIES, LABELS, "Give the topic.", context=ctx, output=out, resume=True)
        assert ctx.engine_stats().n_steps == steps, "nothing ran again"
        plain = newrllama.annotate(STORIES, LABELS, "Give the topic.", context=ctx)
    records = sorted(lines_of(out), key=lambda r: r["index"])
    assert [r["index"] for r in records] == list(range(len(STORIES)))
    assert [a.label for a in done[:4]] == [a.label for a in first]
    assert [a.label for a in again] == [a.label for a in done] == [r["label"] for r in records]
    assert done[4].label is None and done[4].error
    assert [a.label for a in done] == [a.label for a in plain]
    with pytest.raises(newrllama.InvalidArgumentError, match="other settings"):
        newrllama.annotate(STORIES, dict(LABELS, **{"crude oil": "other"}), "Give the topic.", model=model,
                           output=out, resume=True)
    with pytest.raises(newrllama.InvalidArgumentError, match="groups"):
        newrllama.annotate(STORIES, LABELS, model=model, debias="batch", output=tmp_path / "b.jsonl")
    with pytest.raises(newrllama.InvalidArgumentError, match="codebook"):
        newrllama.annotate(STORIES, codebook={"topic": LABELS}, model=model, output=tmp_path / "c.jsonl")
