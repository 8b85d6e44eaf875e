"""Completion.engine_error: whose a failed prompt's error is, the engine's or the prompt's own."""
from __future__ import annotations

import newrllama
from newrllama.engine.calls.generation_job import GenerationJob
from helpers.results_lines import lines_of


def test_a_failed_prompt_says_whether_the_engine_or_the_prompt_failed(model):
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=2) as ctx:
        ctx._inject_decode_failure(after_n_decodes=3, seq_id=1)
        done = ctx.generate_parallel(["Hello", "Once upon a time", "", "word " * 400],
                                     newrllama.SamplingParams(max_tokens=4))
    assert [c.finish_reason for c in done] == ["length", "error", "error", "error"]
    assert "llama_decode failed" in done[1].error and done[1].engine_error
    assert "empty" in done[2].error and not done[2].engine_error
    assert "a sequence holds at most" in done[3].error and not done[3].engine_error
    assert not done[0].engine_error


def test_a_recorded_run_keeps_whose_error_it_was(model, tmp_path):
    out = tmp_path / "run.jsonl"
    prompts = ["Hello", "Once upon a time", "", "word " * 400]
    ids = ["ok", "decode", "empty", "long"]
    params = newrllama.SamplingParams(max_tokens=4)
    with newrllama.Context(model, n_ctx=1024, n_seq_max=4, n_threads=2) as ctx:
        ctx._inject_decode_failure(after_n_decodes=3, seq_id=1)
        ctx.generate_parallel(prompts, params, ids=ids, output=out)
        lines = {r["id"]: r for r in lines_of(out)}
        assert lines["decode"]["engine_error"] is True
        assert all("engine_error" not in lines[i] for i in ("ok", "empty", "long"))
        resumed = ctx.generate_parallel(prompts, params, ids=ids, output=out, resume=True)
        assert ctx.last_stats.n_prompts == 0
    assert [c.engine_error for c in resumed] == [False, True, False, False]


def test_a_prompt_the_cluster_could_not_run_is_the_engines_failure():
    job = GenerationJob(["Hello"], newrllama.SamplingParams(max_tokens=4))
    lost = job.failed("its worker died 3 times running it")
    assert lost.finish_reason == "error" and lost.engine_error
    assert job.from_record(job.record(lost)).engine_error
