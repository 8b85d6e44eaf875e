"""The Python Model API: loading, tokenizer, chat template, closing."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import newrllama


def test_default_model_path_is_cached_gguf():
    path = newrllama.default_model_path()
    assert path.endswith(".gguf")
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
    assert newrllama.default_model_path() == path


def test_missing_non_gguf_and_truncated_files_raise(tmp_path):
    with pytest.raises(newrllama.ModelLoadError, match="cannot open"):
        newrllama.Model(tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(newrllama.ModelLoadError, match="not a GGUF"):
        newrllama.Model(junk)
    truncated = tmp_path / "truncated.gguf"
    with open(newrllama.default_model_path(), "rb") as f:
        truncated.write_bytes(f.read(2_000_000))
    with pytest.raises(newrllama.ModelLoadError):
        newrllama.Model(truncated)
    with pytest.raises(newrllama.InvalidArgumentError):
        newrllama.Model(42)
    for flag in ("use_mmap", "use_mlock"):
        with pytest.raises(newrllama.InvalidArgumentError, match=f"{flag} must be True or False"):
            newrllama.Model(**{flag: "yes"})


def _anon_huge_pages_kb() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(not THP.exists() or "[never]" in THP.read_text(),
                    reason="transparent huge pages are off (or this is not Linux): the weights stay on small pages")
def test_weights_read_into_memory_sit_on_huge_pages_and_give_the_mapped_files_bits():
    # Linux's usual THP setting, "madvise", gives huge pages only to the buffers llama.cpp's patched allocation marks.
    path = newrllama.default_model_path()
    params = newrllama.SamplingParams(choices=["yes", "no", "maybe"])
    prompt = "Is the sky blue? Answer:"
    with newrllama.Model(path, use_mmap=True) as mapped, newrllama.Context(mapped, n_ctx=256) as ctx:
        on_file = ctx.generate(prompt, params).choice_logprobs
    before = _anon_huge_pages_kb()
    with newrllama.Model(path) as read:
        grew_kb = _anon_huge_pages_kb() - before
        with newrllama.Context(read, n_ctx=256) as ctx:
            in_memory = ctx.generate(prompt, params).choice_logprobs
    assert grew_kb * 1024 >= os.path.getsize(path) // 2
    assert {k: v.hex() for k, v in in_memory.items()} == {k: v.hex() for k, v in on_file.items()}


def test_tokenize_round_trip(model):
    text = "Hello, world! Ünïcödé 漢字"
    tokens = model.tokenize(text, add_special=False)
    assert all(isinstance(t, int) for t in tokens)
    assert model.detokenize(tokens) == text
    assert model.tokenize(text)[0] == model.token_bos()


def test_tokenize_edge_inputs(model):
    assert model.tokenize("", add_special=False) == []
    assert model.tokenize("") == [model.token_bos()]
    long_text = "word " * 50_000
    assert len(model.tokenize(long_text, add_special=False)) >= 50_000
    assert model.tokenize(b"\xff\xfe invalid utf-8 \xc3", add_special=False)
    assert model.tokenize("nul\x00inside", add_special=False)
    with pytest.raises(newrllama.InvalidArgumentError):
        model.tokenize(None)
    with pytest.raises(newrllama.InvalidArgumentError):
        model.detokenize([1, "x"])
    with pytest.raises(newrllama.InvalidArgumentError, match="outside the vocabulary"):
        model.detokenize([model.n_vocab + 10])


def test_chat_template_uses_control_tokens(model):
    text = model.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.endswith("<start_of_turn>model\n")
    tokens = model.tokenize(text, add_special=False)
    assert model.token_get_text(tokens[0]) == "<start_of_turn>"
    no_assistant = model.apply_chat_template([{"role": "user", "content": "Hi"}], add_assistant=False)
    assert not no_assistant.endswith("<start_of_turn>model\n")
    long_content = "x" * 100_000
    assert long_content in model.apply_chat_template([{"role": "user", "content": long_content}])
    chatml = model.apply_chat_template([{"role": "user", "content": "Hi"}], template="chatml")
    assert "<|im_start|>user" in chatml
    with pytest.raises(newrllama.InvalidArgumentError):
        model.apply_chat_template([{"role": "user"}])
    with pytest.raises(newrllama.TemplateError):
        model.apply_chat_template([{"role": "user", "content": "Hi"}], template="no such template {{")


def test_use_after_close_raises_and_context_keeps_model_alive():
    m = newrllama.Model()
    ctx = newrllama.Context(m, n_ctx=512, n_seq_max=1)
    m.close()
    m.close()  # idempotent
    with pytest.raises(newrllama.ClosedError):
        m.tokenize("x")
    with pytest.raises(newrllama.ClosedError):
        newrllama.Context(m)
    # The context holds its own reference to the weights.
    assert ctx.generate("Hello", newrllama.SamplingParams(max_tokens=3)).n_gen_tokens >= 1
    ctx.close()
    with pytest.raises(newrllama.ClosedError):
        ctx.generate("Hello")
    with newrllama.Model() as m2:
        assert not m2.closed
    assert m2.closed


@pytest.mark.parametrize("kwargs", [{"n_ctx": 0}, {"n_ctx": 2**40}, {"n_seq_max": -1}, {"n_threads": 0},
                                    {"n_batch": 1.5}, {"n_seq_max": 1000}])
def test_context_rejects_bad_sizes(model, kwargs):
    with pytest.raises(newrllama.InvalidArgumentError):
        newrllama.Context(model, **kwargs)


def test_context_defaults_to_the_usable_cores(model):
    import os
    with newrllama.Context(model, n_ctx=512, n_seq_max=1) as ctx:
        assert ctx.n_threads == len(os.sched_getaffinity(0))
        assert "n_seq_max=1" in repr(ctx)
    assert "closed" in repr(ctx)


def test_a_load_is_logged_where_the_test_profile_asks(tmp_path, monkeypatch):
    """scripts/profile_tests.py counts every process's model loads through NEWRLLAMA_MODEL_LOAD_LOG."""
    log = tmp_path / "loads.jsonl"
    monkeypatch.setenv("NEWRLLAMA_MODEL_LOAD_LOG", str(log))
    with newrllama.Model():
        pass
    entry = json.loads(log.read_text().splitlines()[-1])
    assert entry["file"] == os.path.basename(newrllama.default_model_path()) and entry["pid"] == os.getpid()
    assert "test_a_load_is_logged_where_the_test_profile_asks" in entry["test"] and entry["seconds"] >= 0
