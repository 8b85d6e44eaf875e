"""Cluster on a real local Ray runtime with 2 workers, each loading the embedded model.

The tests that start clusters of their own run before the module's shared cluster
exists: one process holds one local Ray runtime, sized for its first cluster."""
from __future__ import annotations

import _thread
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import newrllama
from helpers.results_lines import assert_recorded_run_refusals, lines_of

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # the fast lane (-m "not slow") leaves it out

PROMPTS = [f"Fact {i}: the river that flows through city number {i} is" for i in range(48)]
PARAMS = newrllama.SamplingParams(max_tokens=12)


def test_bad_arguments_fail_before_ray_starts(tmp_path):
    for kwargs, what in [({"num_workers": 0}, "num_workers"), ({"threads_per_worker": -1}, "threads_per_worker"),
                         ({"n_seq_max": 1.5}, "n_seq_max"), ({"n_ctx": "big"}, "n_ctx"), ({"address": 3}, "address"), ({"startup_timeout": 0}, "startup_timeout"),
                         ({"model": 42}, "model")]:
        with pytest.raises(newrllama.InvalidArgumentError, match=what):
            newrllama.Cluster(**kwargs)
    with pytest.raises(newrllama.ModelLoadError, match="no model file"):
        newrllama.Cluster(str(tmp_path / "missing.gguf"))
    assert not ray.is_initialized()


def test_a_file_that_is_not_gguf_is_a_model_load_error_and_stops_the_runtime(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"this is not a GGUF file" * 100)
    with pytest.raises(newrllama.ModelLoadError):
        newrllama.Cluster(str(bad), num_workers=2)
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def cluster():
    # An address left behind by an earlier `ray start` (here: one where nothing listens) must not be joined.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ADDRESS", "127.0.0.1:9")
        c = newrllama.Cluster(num_workers=2, n_seq_max=8)
    with c:
        yield c


@pytest.fixture(scope="module")
def local_answers(model):
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8) as ctx:
        return ctx.generate_parallel(PROMPTS, PARAMS)


def assert_same_answers(completions, expected):
    """Workers batch other prompts together than the local context does: batch-invariant contexts give the
    same text all the same."""
    assert len(completions) == len(expected)
    for c, e in zip(completions, expected):
        assert c.error is None and (c.finish_reason, c.text) == (e.finish_reason, e.text)


def test_answers_come_in_input_order_and_equal_a_local_call(cluster, local_answers, tmp_path):
    assert len({w["pid"] for w in cluster.workers}) == 2
    out = tmp_path / "answers.jsonl"
    ids = [f"doc-{i}" for i in range(len(PROMPTS))]
    completions = cluster.generate_parallel(PROMPTS, PARAMS, ids=ids, output=out)
    assert_same_answers(completions, local_answers)
    stats = cluster.last_stats
    assert (stats.n_prompts, stats.n_resumed, stats.n_failed, stats.n_chunks) == (48, 0, 0, 6)
    records = lines_of(out)
    assert sorted(r["index"] for r in records) == list(range(48))
    for r in records:
        c = completions[r["index"]]
        assert r["id"] == ids[r["index"]] and r["text"] == c.text and r["finish_reason"] == c.finish_reason
        assert r["n_prompt_tokens"] == c.n_prompt_tokens and r["n_gen_tokens"] == c.n_gen_tokens == 12


def test_a_bad_prompt_fails_alone(cluster, local_answers):
    long_prompt = "word " * 2000  # longer than a sequence (8192 / 8 cells)
    prompts = [PROMPTS[0], "", long_prompt, [10**9], PROMPTS[1]]
    done = cluster.generate_parallel(prompts, PARAMS)
    assert [c.finish_reason for c in done] == ["length", "error", "error", "error", "length"]
    assert "empty" in done[1].error and "sequence holds at most 1024" in done[2].error
    assert "outside the vocabulary" in done[3].error
    assert cluster.last_stats.n_failed == 3
    with pytest.raises(newrllama.InvalidArgumentError, match=r"prompts\[1\] is None"):
        cluster.generate_parallel([PROMPTS[0], None], PARAMS)
    with pytest.raises(newrllama.InvalidArgumentError, match="grammar of prompt 0"):
        cluster.generate_parallel(PROMPTS[:2], newrllama.SamplingParams(grammar="root ::= ("))
    assert cluster.generate_parallel([PROMPTS[0]], PARAMS)[0].text == done[0].text


def test_per_prompt_params_and_choices_reach_the_workers_and_the_file(cluster, tmp_path):
    out = tmp_path / "mixed.jsonl"
    label = newrllama.SamplingParams(choices=["rivers", "cities"])
    params = [PARAMS, newrllama.SamplingParams(max_tokens=3), label] * 4
    done = cluster.generate_parallel(PROMPTS[:12], params, output=out)
    assert [c.n_gen_tokens for c in done[:3]] == [12, 3, done[2].n_gen_tokens]
    assert done[2].text in ("rivers", "cities") and sum(done[2].choice_probs.values()) == pytest.approx(1)
    records = {r["index"]: r for r in lines_of(out)}
    assert records[2]["choice_probs"] == done[2].choice_probs and "choice_probs" not in records[0]
    again = cluster.generate_parallel(PROMPTS[:12], params, output=out, resume=True)
    assert [c.choice_probs for c in again] == [c.choice_probs for c in done]


def test_the_workers_format_chat_messages_with_their_models_template(cluster, model):
    chats = [[{"role": "user", "content": "Name a colour."}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]]
    assert cluster.apply_chat_template(chats) == [model.apply_chat_template(c) for c in chats]
    with pytest.raises(newrllama.InvalidArgumentError):
        cluster.apply_chat_template("Hi")
    with pytest.raises(newrllama.InvalidArgumentError):
        cluster.apply_chat_template([[{"role": "user"}]])


def test_output_and_resume_arguments_are_checked(cluster, tmp_path):
    assert_recorded_run_refusals(cluster.generate_parallel, PROMPTS, PARAMS, tmp_path / "a.jsonl", tmp_path)


def test_a_killed_worker_has_its_chunk_retried_on_another(cluster, local_answers):
    victim = cluster.workers[0]["pid"]
    box = {}
    runner = threading.Thread(target=lambda: box.update(done=cluster.generate_parallel(PROMPTS, PARAMS)))
    runner.start()
    time.sleep(1.5)  # both workers are busy with their first chunks
    os.kill(victim, signal.SIGKILL)
    runner.join(240)
    assert not runner.is_alive()
    stats = cluster.last_stats
    assert stats.n_retried_chunks >= 1 and stats.n_workers_replaced == 1 and stats.n_failed == 0
    assert_same_answers(box["done"], local_answers)
    pids = {w["pid"] for w in cluster.workers}
    assert len(pids) == 2 and victim not in pids


KILLED_RUN = """
import sys, newrllama
prompts = [f"Fact {i}: the river that flows through city number {i} is" for i in range(48)]
with newrllama.Cluster(num_workers=2, n_seq_max=8) as cluster:
    print("started", flush=True)
    cluster.generate_parallel(prompts, newrllama.SamplingParams(max_tokens=12), output=sys.argv[1])
"""


def test_a_run_killed_half_way_resumes_with_every_prompt_once(cluster, local_answers, tmp_path):
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(out)], stdout=subprocess.PIPE, env=env,
                           start_new_session=True)
    try:
        assert run.stdout.readline().strip() == b"started"
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the driver and the Ray runtime it started
        run.wait()
    before = lines_of(out)
    assert 0 < len(before) < 48, "the run was killed after its first chunks and before its last"
    with open(out, "ab") as f:
        f.write(b'{"index": 47, "text": "torn by the ki')  # a line cut by the kill
    done = cluster.generate_parallel(PROMPTS, PARAMS, output=out, resume=True)
    assert cluster.last_stats.n_resumed == len(before)
    records = lines_of(out)
    assert sorted(r["index"] for r in records) == list(range(48))
    assert records[: len(before)] == before
    assert_same_answers(done, local_answers)
    for r in before:
        assert done[r["index"]].text == r["text"] and done[r["index"]].token_ids == []


def test_annotate_on_the_cluster_equals_annotate_locally(cluster, model, tmp_path):
    texts = ["Texaco agreed to buy Getty Oil for $10 billion.", "OPEC ministers agreed to cut crude output.",
             None, "Shares of the acquired firm rose after the takeover bid."]
    labels = ["acquisition", "crude oil"]
    out = tmp_path / "labels.jsonl"
    with pytest.warns(newrllama.BaseModelWarning, match="gemma-3-270m"):  # the workers' embedded model, said here
        remote = cluster.annotate(texts, labels, "Give the topic of the news story.", ids=[10, 11, 12, 13],
                                  output=out)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4) as ctx:
        local = newrllama.annotate(texts, labels, "Give the topic of the news story.", context=ctx)
        # A cascade whose first stage runs on the workers (here the second on the same model, in a local context).
        cascade = newrllama.Cascade(ctx, share=0.5)
        cascaded = newrllama.annotate(texts, labels, "Give the topic of the news story.", context=ctx, cascade=cascade)
        remote_cascade = cluster.annotate(texts, labels, "Give the topic of the news story.", cascade=cascade)
    assert remote_cascade == cascaded and remote_cascade[0].provenance.cascade["n_second"] == 2
    assert [a.label for a in remote] == [a.label for a in local]
    assert remote[2].error == "text is missing or empty"
    # Workers batch other prompts together than the local context does: the same probabilities all the same.
    assert [r.probs for r in remote] == [l.probs for l in local]
    records = {r["id"]: r for r in lines_of(out)}
    assert records[10]["label"] == remote[0].label and records[10]["probs"] == remote[0].probs
    again = cluster.annotate(texts, labels, "Give the topic of the news story.", ids=[10, 11, 12, 13], output=out,
                             resume=True)
    assert again == remote and cluster.last_stats.n_resumed == 4


def test_every_argument_of_annotate_reaches_the_workers_and_the_results_file(cluster, model, tmp_path):
    """Definitions, examples, a debias method, a calibration and a codebook: the cluster's labels are a local call's, and
    its file is a local recorded run's (same digests), so a run recorded on one resumes on the other."""
    texts = ["Texaco agreed to buy Getty Oil for $10 billion.", "OPEC ministers agreed to cut crude output.",
             "Shares of the acquired firm rose after the takeover bid.", "Brent crude fell two dollars a barrel.",
             "The bank bought a stake in the insurer.", "Saudi Arabia raised its oil exports."] * 2
    truth = ["acquisition", "crude oil", "acquisition", "crude oil", "acquisition", "crude oil"] * 2
    labels = {"acquisition": "one company buys another, or a stake in it",
              "crude oil": "oil prices, output, exports or supply"}
    examples = [("Exxon bought a refinery in Texas.", "acquisition")]
    codebook = {"topic": labels, "tone": ["good news", "bad news"]}
    instruction = "Give the topic of the news story."
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8) as ctx:
        local = newrllama.annotate(texts, labels, instruction, examples=examples, debias="rotations", context=ctx)
        calibration = newrllama.calibrate(local, truth, penalty=1.0)
        calibrated = calibration.apply(local)
        book = newrllama.annotate(texts, codebook=codebook, instruction=instruction, context=ctx)
        by_codes = newrllama.annotate(texts, codebook=codebook, instruction=instruction, context=ctx,
                                      calibration={"topic": truth[:8] + [None] * 4})
    assert by_codes[0]["topic"].provenance.for_calibration and not by_codes[0]["tone"].provenance.for_calibration
    assert cluster.annotate(texts, codebook=codebook, instruction=instruction,
                            calibration={"topic": truth[:8] + [None] * 4}) == by_codes
    remote = cluster.annotate(texts, labels, instruction, examples=examples, debias="rotations",
                              calibration=calibration)
    assert remote == calibrated  # labels, probabilities (exactly), raw and order-free ones, order flips
    assert cluster.last_stats.n_chunks > 1
    out = tmp_path / "book.jsonl"
    remote_book = cluster.annotate(texts, codebook=codebook, instruction=instruction, output=out)
    assert remote_book == book and set(remote_book[0]) == {"topic", "tone"}
    assert lines_of(out)[0]["questions"]["topic"]["label"] == book[0]["topic"].label
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8) as ctx:
        resumed = newrllama.annotate(texts, codebook=codebook, instruction=instruction, context=ctx, output=out,
                                     resume=True)
    assert resumed == book
    with pytest.raises(newrllama.InvalidArgumentError, match="other settings"):
        cluster.annotate(texts, codebook={**codebook, "tone": ["good", "bad"]}, instruction=instruction,
                         output=out, resume=True)
    with pytest.raises(newrllama.InvalidArgumentError, match="not both or neither"):
        cluster.annotate(texts, labels, instruction, codebook=codebook)
    with pytest.warns(newrllama.AnnotationWarning, match="each chunk a worker labels"):
        cluster.annotate(texts, labels, instruction, debias="batch")


def test_the_cluster_records_its_workers_model_refuses_another_and_retries_failed_prompts(cluster, model, tmp_path):
    """The file of a local context (256 cells per sequence, too few for the long prompt) resumed on the cluster
    (1024): both run the embedded model, so the cluster takes the file on and runs only what failed."""
    out = tmp_path / "run.jsonl"
    long_prompt = "Write a long note about rivers, lakes and seas. " * 25  # 277 tokens
    prompts = [PROMPTS[0], long_prompt, PROMPTS[1]]
    with newrllama.Context(model, n_ctx=2048, n_seq_max=8, n_threads=2) as ctx:
        first = ctx.generate_parallel(prompts, PARAMS, output=out)
    assert [c.finish_reason for c in first] == ["length", "error", "length"]
    mine = model.identity().sha256
    good = out.read_bytes()
    other = hashlib.sha256(b"another model").hexdigest()
    out.write_bytes(good.replace(mine.encode(), other.encode()))
    stats = cluster.last_stats
    with pytest.raises(newrllama.InvalidArgumentError, match=f"{other}.*{mine}"):
        cluster.generate_parallel(prompts, PARAMS, output=out, resume=True, retry_errors=True)
    assert cluster.last_stats is stats and out.read_bytes() == good.replace(mine.encode(), other.encode())
    out.write_bytes(good)
    with pytest.raises(newrllama.InvalidArgumentError, match="resume=True"):
        cluster.generate_parallel(prompts, PARAMS, output=out, retry_errors=True)
    done = cluster.generate_parallel(prompts, PARAMS, output=out, resume=True, retry_errors=True)
    assert (cluster.last_stats.n_resumed, cluster.last_stats.n_failed) == (2, 0)
    assert [c.finish_reason for c in done] == ["length"] * 3 and done[0].text == first[0].text
    records = lines_of(out)
    assert [r["index"] for r in records][3:] == [1] and all(r["model_sha256"] == mine for r in records)
    again = cluster.generate_parallel(prompts, PARAMS, output=out, resume=True, retry_errors=True)
    assert cluster.last_stats.n_resumed == 3 and [c.text for c in again] == [c.text for c in done]


def test_ctrl_c_cancels_the_chunks_in_flight(cluster, ctrl_c_raises):
    long_answers = newrllama.SamplingParams(max_tokens=400)
    threading.Timer(1.5, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        cluster.generate_parallel(PROMPTS, long_answers)
    # Had the workers gone on with the interrupted chunks (16 answers of 400 tokens), they would be busy for tens
    # of seconds more; cancelled, their prompts are gone within a step or two.
    deadline = time.monotonic() + 10
    while any(w["n_running"] + w["n_waiting"] for w in cluster.workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(w["n_running"], w["n_waiting"]) for w in cluster.workers] == [(0, 0), (0, 0)]
    assert cluster.generate_parallel(PROMPTS[:2], PARAMS)[0].finish_reason == "length"


def test_close_stops_the_workers_and_the_runtime(cluster):
    pids = [w["pid"] for w in cluster.workers]
    cluster.close()
    cluster.close()
    with pytest.raises(newrllama.ClosedError):
        cluster.generate_parallel(PROMPTS[:1])
    assert not ray.is_initialized()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") and "zombie" not in _state(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(not os.path.exists(f"/proc/{p}") or "zombie" in _state(p) for p in pids)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line for line in f if line.startswith("State:")).lower()
    except OSError:
        return "zombie"


JOIN = """
import sys, newrllama
with newrllama.Cluster(num_workers=2, threads_per_worker=1, n_seq_max=4, address=sys.argv[1],
                       startup_timeout=120) as cluster:
    done = cluster.generate_parallel(["The capital of France is"] * 4, newrllama.SamplingParams(max_tokens=3))
    print(len({w["pid"] for w in cluster.workers}), [c.finish_reason for c in done])
"""


def test_a_cluster_joins_a_ray_cluster_started_with_ray_start():
    """`ray start --head`, as a user starts a cluster's head node, then a script with Cluster(address=...)."""
    # This process has run local runtimes, from which Ray cannot join a cluster: said at once.
    with pytest.raises(newrllama.ClusterError, match="new Python"):
        newrllama.Cluster(address="127.0.0.1:9")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths under it must fit in 107 bytes
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    # ray start turns token authentication on, which a driver follows only with RAY_AUTH_MODE=token set
    # before Ray is imported; the head here opts out instead (see README).
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": os.pathsep.join(sys.path)}
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", f"--temp-dir={temp}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=env)
    try:
        seen = []
        for line in head.stdout:
            seen.append(line)
            if "Ray runtime started" in line:
                break
        assert any("Ray runtime started" in line for line in seen), "".join(seen[-20:])
        script = subprocess.run([sys.executable, "-c", JOIN, f"127.0.0.1:{port}"], capture_output=True, text=True,
                                env=env, timeout=240)
        assert script.returncode == 0, script.stderr[-2000:]
        assert script.stdout.strip().splitlines()[-1] == "2 ['length', 'length', 'length', 'length']"
        assert head.poll() is None  # the driver left; the head node is the user's to stop
    finally:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
