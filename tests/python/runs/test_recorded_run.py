"""A long run on one Context writes its answers as they finish and resumes after a crash,
with the cluster's file format and rules (one implementation, newrllama.runs.results_file)."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import newrllama
from helpers.results_lines import assert_recorded_run_refusals, lines_of

PROMPTS = [f"Write a short note about the number {i}:" for i in range(24)]
PARAMS = newrllama.SamplingParams(max_tokens=24)
FEW = newrllama.SamplingParams(max_tokens=2)  # where the answers only need to exist


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
    assert_recorded_run_refusals(ctx.generate_parallel, PROMPTS, PARAMS, tmp_path / "run.jsonl", tmp_path)
    assert ctx.engine_stats().n_running == 0
    assert all(c.finish_reason == "length" for c in ctx.generate_parallel(PROMPTS[:2], PARAMS))


KILLED_RUN = """
import sys, newrllama
with newrllama.Model() as model, newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=1) as ctx:
    print("started", flush=True)
    ctx.generate_parallel([f"Write a short note about the number {i}:" for i in range(24)],
                          newrllama.SamplingParams(max_tokens=24), output=sys.argv[1])
"""


@pytest.mark.slow
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


def test_a_resume_finds_each_text_s_labels_by_the_text_after_the_rows_are_reordered_or_a_text_changes(model, tmp_path):
    """The corpus read back in another order resumes with each label on its own text and nothing run again; with
    ids, a text edited since is labelled again and the others are not."""
    out, by_id = tmp_path / "labels.jsonl", tmp_path / "by_id.jsonl"
    ids = [f"s{i}" for i in range(len(STORIES))]
    order = [6, 2, 0, 5, 4, 1, 3]
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        first = newrllama.annotate(STORIES, LABELS, "Give the topic.", context=ctx, output=out)
        newrllama.annotate(STORIES, LABELS, "Give the topic.", context=ctx, output=by_id, ids=ids)
        steps = ctx.engine_stats().n_steps
        shuffled = newrllama.annotate([STORIES[i] for i in order], LABELS, "Give the topic.", context=ctx,
                                      output=out, resume=True)
        assert ctx.engine_stats().n_steps == steps, "nothing ran again"
        assert [a for a in shuffled] == [first[i] for i in order]
        edited = list(STORIES)
        edited[1] = "Chevron agreed to buy Gulf Oil for 13 billion dollars."
        again = newrllama.annotate([edited[i] for i in order], LABELS, "Give the topic.", context=ctx,
                                   output=by_id, ids=[ids[i] for i in order], resume=True)
        assert ctx.engine_stats().n_steps > steps, "the edited text ran"
        fresh = newrllama.annotate([edited[1]], LABELS, "Give the topic.", context=ctx)
    assert [again[order.index(i)] for i in (0, 2, 3)] == [first[i] for i in (0, 2, 3)]
    assert again[order.index(1)] == fresh[0]
    assert len(lines_of(out)) == len(STORIES) and len(lines_of(by_id)) == len(STORIES) + 1


def test_a_codebook_and_a_whole_call_debias_method_are_recorded_and_resumed(model, tmp_path):
    codebook = {"topic": LABELS, "tone": ["good news", "bad news"]}
    out = tmp_path / "book.jsonl"
    with newrllama.Context(model, n_ctx=4096, n_seq_max=8, n_threads=2) as ctx:
        rest = newrllama.annotate(STORIES[3:], codebook=codebook, context=ctx, debias="prior")
        first = newrllama.annotate(STORIES[:3], codebook=codebook, context=ctx, debias="prior", output=out)
        assert [set(r) for r in first] == [{"topic", "tone"}] * 3
        done = newrllama.annotate(STORIES, codebook=codebook, context=ctx, debias="prior", output=out, resume=True)
        steps = ctx.engine_stats().n_steps
        again = newrllama.annotate(STORIES, codebook=codebook, context=ctx, debias="prior", output=out, resume=True)
        assert ctx.engine_stats().n_steps == steps, "nothing ran again"
        many = STORIES[:4] * 17  # 68 texts: two groups of the file, each estimating its own correction
        with pytest.warns(newrllama.AnnotationWarning, match="each group written to the output file") as seen:
            newrllama.annotate(many, LABELS, context=ctx, debias="batch", output=tmp_path / "many.jsonl")
        assert seen[0].filename == __file__  # the warning points at the caller's line
    assert again == done and done[:3] == first
    assert done[4]["topic"].error and done[4]["tone"].error
    records = sorted(lines_of(out), key=lambda r: r["index"])
    assert records[4]["error"] and records[0]["questions"]["tone"]["label"] == done[0]["tone"].label
    # The texts resumed are labelled as a call on them alone would label them (the prior estimated over them).
    assert done[3:] == rest
    with pytest.raises(newrllama.InvalidArgumentError, match="other settings"):
        newrllama.annotate(STORIES, codebook={"topic": LABELS}, model=model, debias="prior", output=out, resume=True)


def _with_model_hash(path, sha256):
    """The file's lines as another model (of SHA-256 ``sha256``, or none when None) would have written them."""
    records = lines_of(path)
    for r in records:
        r.pop("model_sha256")
        if sha256 is not None:
            r["model_sha256"] = sha256
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path.read_bytes()


def test_every_line_records_the_model_and_another_models_file_is_refused_before_anything_runs(ctx, tmp_path):
    out = tmp_path / "run.jsonl"
    ctx.generate_parallel(PROMPTS[:3], FEW, output=out)
    mine = ctx.model.identity().sha256
    assert [r["model_sha256"] for r in lines_of(out)] == [mine] * 3
    other = hashlib.sha256(b"another model").hexdigest()
    before = _with_model_hash(out, other)
    steps = ctx.engine_stats().n_steps
    with pytest.raises(newrllama.InvalidArgumentError) as refused:
        ctx.generate_parallel(PROMPTS[:4], FEW, output=out, resume=True)
    for part in (str(out), other, mine, ctx.model.path):
        assert part in str(refused.value)
    assert out.read_bytes() == before and ctx.engine_stats().n_steps == steps


def test_lines_that_do_not_record_their_model_are_refused_with_the_way_out(ctx, tmp_path):
    out = tmp_path / "old.jsonl"
    ctx.generate_parallel(PROMPTS[:2], FEW, output=out)
    before = _with_model_hash(out, None)
    mine = ctx.model.identity().sha256
    with pytest.raises(newrllama.InvalidArgumentError, match=f'does not say which model.*"model_sha256": "{mine}"'):
        ctx.generate_parallel(PROMPTS[:2], FEW, output=out, resume=True)
    assert out.read_bytes() == before


def _instruct_model_path():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    from fetch_instruct_model import FILE_NAME, cache_dir
    return cache_dir() / FILE_NAME


@pytest.mark.skipif(not _instruct_model_path().exists(), reason="the instruct model is not in the cache "
                    "(scripts/fetch_instruct_model.py)")
def test_a_file_written_with_the_embedded_model_is_refused_by_the_instruct_model(ctx, tmp_path):
    out = tmp_path / "run.jsonl"
    ctx.generate_parallel(PROMPTS[:2], FEW, output=out)
    before = out.read_bytes()
    with newrllama.Model(_instruct_model_path()) as instruct, \
            newrllama.Context(instruct, n_ctx=512, n_seq_max=2, n_threads=2) as other:
        with pytest.raises(newrllama.InvalidArgumentError, match="mix two models") as refused:
            other.generate_parallel(PROMPTS[:2], FEW, output=out, resume=True)
        assert instruct.identity().sha256 in str(refused.value)
        assert other.engine_stats().n_steps == 0
    assert ctx.model.identity().sha256 in str(refused.value) and out.read_bytes() == before


LONG = "Write a long note about rivers, lakes and seas. " * 25  # 277 tokens: more than ctx's 256 per sequence


def test_retry_errors_runs_again_only_the_failed_prompts(ctx, model, tmp_path):
    out = tmp_path / "run.jsonl"
    prompts = [PROMPTS[0], LONG, PROMPTS[1]]
    first = ctx.generate_parallel(prompts, FEW, ids=["a", "long", "b"], output=out)
    assert [c.finish_reason for c in first] == ["length", "error", "length"]
    assert {r["id"]: r["error"] for r in lines_of(out)} == {"a": None, "long": first[1].error, "b": None}
    # Without retry_errors, a failed prompt's line is its result, as before.
    again = ctx.generate_parallel(prompts, FEW, ids=["a", "long", "b"], output=out, resume=True)
    assert ctx.last_stats.n_prompts == 0 and again[1].error == first[1].error
    with newrllama.Context(model, n_ctx=2048, n_seq_max=2, n_threads=2) as roomy:
        retried = roomy.generate_parallel(prompts, FEW, ids=["a", "long", "b"], output=out, resume=True,
                                          retry_errors=True)
        assert roomy.last_stats.n_prompts == 1
    assert [c.finish_reason for c in retried] == ["length"] * 3 and len(retried) == 3
    assert [c.text for c in retried[::2]] == [c.text for c in first[::2]]
    records = lines_of(out)
    assert [r["id"] for r in records].count("long") == 2 and len(records) == 4
    assert records[-1]["id"] == "long" and records[-1]["error"] is None and records[-1]["text"] == retried[1].text
    # The last line of a prompt is its result; nothing failed is left to retry.
    for retry in (False, True):
        done = ctx.generate_parallel(prompts, FEW, ids=["a", "long", "b"], output=out, resume=True,
                                     retry_errors=retry)
        assert ctx.last_stats.n_prompts == 0 and [c.text for c in done] == [c.text for c in retried]
    assert len(lines_of(out)) == 4


def test_retry_errors_needs_resume(ctx, tmp_path):
    for kwargs in ({"retry_errors": True}, {"retry_errors": True, "output": tmp_path / "r.jsonl"}):
        with pytest.raises(newrllama.InvalidArgumentError, match="resume=True"):
            ctx.generate_parallel(PROMPTS[:1], FEW, **kwargs)
        with pytest.raises(newrllama.InvalidArgumentError, match="resume=True"):
            newrllama.annotate(STORIES[:1], LABELS, context=ctx, **kwargs)
    with pytest.raises(newrllama.InvalidArgumentError, match="retry_errors must be True or False"):
        ctx.generate_parallel(PROMPTS[:1], FEW, output=tmp_path / "r.jsonl", resume=True, retry_errors="yes")
    assert not (tmp_path / "r.jsonl").exists()


def test_annotate_refuses_another_models_file_and_retries_the_texts_that_failed(model, ctx, tmp_path):
    out = tmp_path / "labels.jsonl"
    texts = [STORIES[0], LONG, STORIES[1]]
    first = newrllama.annotate(texts, LABELS, "Give the topic.", context=ctx, output=out, debias="none")
    assert first[1].label is None and first[1].error and first[0].label and first[2].label
    good = out.read_bytes()
    other = hashlib.sha256(b"another model").hexdigest()
    _with_model_hash(out, other)
    with pytest.raises(newrllama.InvalidArgumentError, match=other):
        newrllama.annotate(texts, LABELS, "Give the topic.", context=ctx, output=out, resume=True, retry_errors=True,
                           debias="none")
    out.write_bytes(good)
    with newrllama.Context(model, n_ctx=2048, n_seq_max=2, n_threads=2) as roomy:
        steps = roomy.engine_stats().n_steps
        done = newrllama.annotate(texts, LABELS, "Give the topic.", context=roomy, output=out, resume=True,
                                  retry_errors=True, debias="none")
        assert roomy.engine_stats().n_steps > steps
    assert [a.label for a in done[::2]] == [a.label for a in first[::2]] and done[1].label in LABELS
    assert [r["index"] for r in lines_of(out)] == [0, 1, 2, 1]
