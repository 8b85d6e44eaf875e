"""Completion.engine_error: whose a failed prompt's error is, the engine's or the prompt's own."""
from __future__ import annotations

import newrllama


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
