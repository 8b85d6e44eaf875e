"""The C functions called directly through cffi, with bad inputs: each answers with an error code and message."""
from __future__ import annotations

import threading

import pytest

import newrllama  # noqa: F401  (initializes the backend and checks the library)
from newrllama._capi import ffi, lib

OK = lib.NEWRLLAMA_OK
INVALID = lib.NEWRLLAMA_ERROR_INVALID_ARGUMENT


def err_slot():
    return ffi.new("const char **")


def message(err) -> str:
    return ffi.string(err[0]).decode()


@pytest.fixture
def c_ctx(model):
    out = ffi.new("newrllama_context_handle *")
    err = err_slot()
    assert lib.newrllama_context_create(model.handle, 1024, 2, 4, 0, out, err) == OK
    yield out[0]
    lib.newrllama_context_free(out[0])


def test_model_load_rejects_null_missing_and_non_gguf(tmp_path):
    out = ffi.new("newrllama_model_handle *")
    err = err_slot()
    assert lib.newrllama_model_load(ffi.NULL, 0, True, False, out, err) == INVALID
    assert "model_path" in message(err)
    assert lib.newrllama_model_load(b"/nonexistent/x.gguf", 0, True, False, out, err) == lib.NEWRLLAMA_ERROR_MODEL_LOAD
    assert "cannot open" in message(err)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert lib.newrllama_model_load(str(text).encode(), 0, True, False, out, err) == lib.NEWRLLAMA_ERROR_MODEL_LOAD
    assert "not a GGUF" in message(err)
    assert lib.newrllama_model_load(b"x.gguf", 0, True, False, ffi.NULL, err) == INVALID
    assert lib.newrllama_model_load(b"x.gguf", -5, True, False, out, err) == INVALID
    assert out[0] == ffi.NULL


def test_truncated_gguf_fails_cleanly(tmp_path):
    source = newrllama.default_model_path()
    truncated = tmp_path / "truncated.gguf"
    with open(source, "rb") as f:
        truncated.write_bytes(f.read(5_000_000))
    out = ffi.new("newrllama_model_handle *")
    err = err_slot()
    assert lib.newrllama_model_load(str(truncated).encode(), 0, True, False, out, err) == lib.NEWRLLAMA_ERROR_MODEL_LOAD
    assert "could not load" in message(err)


def test_null_handles_are_rejected_everywhere(model):
    err = err_slot()
    ctx_out = ffi.new("newrllama_context_handle *")
    assert lib.newrllama_context_create(ffi.NULL, 512, 1, 1, 0, ctx_out, err) == INVALID
    tokens = ffi.new("int32_t **")
    n = ffi.new("size_t *")
    assert lib.newrllama_tokenize(ffi.NULL, b"x", 1, True, tokens, n, err) == INVALID
    assert lib.newrllama_tokenize(model.handle, ffi.NULL, 0, True, tokens, n, err) == INVALID
    text = ffi.new("char **")
    assert lib.newrllama_detokenize(ffi.NULL, ffi.NULL, 0, text, ffi.NULL, err) == INVALID
    assert lib.newrllama_apply_chat_template(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0, True, text, err) == INVALID
    assert lib.newrllama_generate(ffi.NULL, ffi.NULL, 0, 8, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == INVALID
    results = ffi.new("char ***")
    params = ffi.new("struct newrllama_parallel_params *", [8, 40, 1.0, 0.0, 0, 1.0, 1])
    assert lib.newrllama_generate_parallel(ffi.NULL, ffi.NULL, 0, params, results, err) == INVALID
    assert lib.newrllama_model_n_vocab(ffi.NULL) == -1
    assert lib.newrllama_context_n_ctx(ffi.NULL) == -1
    assert lib.newrllama_token_get_text(ffi.NULL, 0) == ffi.NULL
    assert not lib.newrllama_token_is_eog(ffi.NULL, 1)
    # The free functions accept NULL.
    lib.newrllama_model_free(ffi.NULL)
    lib.newrllama_context_free(ffi.NULL)
    lib.newrllama_free_string(ffi.NULL)
    lib.newrllama_free_string_array(ffi.NULL, 3)
    lib.newrllama_free_completions(ffi.NULL, 3)


@pytest.mark.parametrize("n_ctx,n_seq_max,n_batch,n_threads", [
    (0, 1, 0, 1), (-5, 1, 0, 1), (512, 0, 0, 1), (512, 300, 0, 1), (512, 4, 2, 1), (512, 4, 1024, 1),
    (512, 4, 0, -1), (2**30, 1, 0, 1),
])
def test_context_create_rejects_bad_sizes(model, n_ctx, n_seq_max, n_batch, n_threads):
    out = ffi.new("newrllama_context_handle *")
    err = err_slot()
    assert lib.newrllama_context_create(model.handle, n_ctx, n_threads, n_seq_max, n_batch, out, err) == INVALID
    assert out[0] == ffi.NULL
    assert message(err)


def test_context_reports_sizes(c_ctx):
    assert lib.newrllama_context_n_ctx(c_ctx) >= 1024
    assert lib.newrllama_context_n_seq_max(c_ctx) == 4
    assert lib.newrllama_context_n_ctx_seq(c_ctx) == lib.newrllama_context_n_ctx(c_ctx) // 4
    assert lib.newrllama_context_n_batch(c_ctx) == 512


def test_tokenize_parses_control_tokens(model):
    tokens = model.tokenize("<start_of_turn>user", add_special=False)
    assert len(tokens) == 2 and model.token_get_text(tokens[0]) == "<start_of_turn>"


def test_detokenize_rejects_ids_outside_vocabulary(model):
    err = err_slot()
    text = ffi.new("char **")
    ids = ffi.new("int32_t[]", [2, model.n_vocab])
    assert lib.newrllama_detokenize(model.handle, ids, 2, text, ffi.NULL, err) == INVALID
    assert "outside the vocabulary" in message(err)


def test_generate_checks_tokens_and_params(c_ctx, model):
    err = err_slot()
    text = ffi.new("char **")
    good = ffi.new("int32_t[]", model.tokenize("Hello"))
    bad = ffi.new("int32_t[]", [2, -7])
    assert lib.newrllama_generate(c_ctx, bad, 2, 8, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 0, 8, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 2, 0, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == INVALID
    assert "max_tokens" in message(err)
    assert lib.newrllama_generate(c_ctx, good, 2, 8, 40, 1.5, 0.0, 0, 1.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 2, 8, 40, 1.0, float("nan"), 0, 1.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 2, 8, 40, 1.0, float("inf"), 0, 1.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 2, 8, 40, 1.0, 0.0, 0, 0.0, 1, text, err) == INVALID
    assert lib.newrllama_generate(c_ctx, good, 2, 4, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == OK
    try:
        assert ffi.string(text[0])
    finally:
        lib.newrllama_free_string(text[0])


def test_generate_counts_tokens_not_bytes(c_ctx, model):
    """The original compared max_tokens with the length of the answer in bytes."""
    tokens = model.tokenize("Once upon a time")
    c_tokens = ffi.new("int32_t[]", tokens)
    err = err_slot()
    text = ffi.new("char **")
    assert lib.newrllama_generate(c_ctx, c_tokens, len(tokens), 5, 40, 1.0, 0.0, 0, 1.0, 1, text, err) == OK
    try:
        answer = ffi.string(text[0]).decode()
    finally:
        lib.newrllama_free_string(text[0])
    # Exactly five tokens: the greedy answer the engine gives for max_tokens=5 (retokenizing the text could merge
    # pieces), which is longer than five bytes and differs from the answers of four and six tokens.
    with newrllama.Context(model, n_ctx=1024, n_seq_max=1, n_threads=2) as ctx:
        greedy = {n: ctx.generate_parallel(["Once upon a time"], newrllama.SamplingParams(max_tokens=n,
                                                                                         temperature=0.0))[0]
                  for n in (4, 5, 6)}
    assert greedy[5].n_gen_tokens == 5 and answer == greedy[5].text
    assert answer not in (greedy[4].text, greedy[6].text)
    assert len(answer) > 5


def test_error_messages_are_per_thread(model):
    """Two threads failing at once each read their own message."""
    failures = []

    def worker(path: bytes, expect: str) -> None:
        out = ffi.new("newrllama_model_handle *")
        err = err_slot()
        for _ in range(300):
            lib.newrllama_model_load(path, 0, True, False, out, err)
            if expect not in message(err):
                failures.append(message(err))

    threads = [threading.Thread(target=worker, args=(b"/nonexistent/aaa.gguf", "aaa")),
               threading.Thread(target=worker, args=(b"/nonexistent/bbb.gguf", "bbb"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_loaded_library_is_the_one_built_against():
    import os
    loaded = os.path.realpath(ffi.string(lib.newrllama_llama_library_path()).decode())
    built_dir = os.path.realpath(ffi.string(lib.newrllama_built_library_dir()).decode())
    assert os.path.dirname(loaded) == built_dir
    assert ffi.string(lib.newrllama_llama_version()).decode()


def test_cdef_matches_header():
    """The cdef is derived from the header; every declared function must be callable."""
    import re
    from pathlib import Path
    header = (Path(__file__).parents[3] / "capi_shim" / "newrllama_capi.h").read_text()
    names = set(re.findall(r"\b(newrllama_\w+)\s*\(", header))
    missing = [n for n in names if not hasattr(lib, n)]
    assert names and missing == []
