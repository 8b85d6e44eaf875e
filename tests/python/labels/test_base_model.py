"""Labels asked of a base model are not given without a word: the embedded gemma-3-270m has no chat template of its
own, and annotate() says so before any work, with what to load instead; an instruct model labels without it."""
from __future__ import annotations

import warnings

import pytest

import newrllama
from newrllama.models import catalog
from newrllama.models.embedded import cache_dir
from newrllama.models.gguf_size import gguf_keys

from helpers.small_gguf import small_gguf

LABELS, INSTRUCTION = ["acquisition", "crude oil"], "Give the topic of the news story."
SMALL = next(m for m in catalog.RECOMMENDED if m.name == "qwen2.5-coder-0.5b-instruct")


def test_the_header_s_keys_are_read(tmp_path):
    path = tmp_path / "small.gguf"
    path.write_bytes(small_gguf(256))
    assert gguf_keys(path) == {"general.name"}
    path.write_bytes(small_gguf(256)[:40])
    with pytest.raises(ValueError, match="cannot read the metadata"):
        gguf_keys(path)


def test_annotating_with_the_embedded_model_warns_before_any_work(ctx):
    assert not ctx.model.has_chat_template
    with pytest.warns(newrllama.BaseModelWarning, match=r"no chat template: it is a base model.*"
                                                        r"Model\(\"qwen2.5-coder-1.5b-instruct\"\)"):
        out = newrllama.annotate(["Texaco agreed to buy Getty Oil."], LABELS, INSTRUCTION, context=ctx)
    assert out[0].label in LABELS  # a warning, not a refusal: the machinery may be tried on it
    with pytest.warns(newrllama.BaseModelWarning):  # without a context, the model loaded for the call
        newrllama.annotate(["OPEC cut its crude output."], LABELS, INSTRUCTION, n_threads=2)


@pytest.mark.skipif(not (cache_dir() / SMALL.file_name).exists(),
                    reason=f"{SMALL.file_name} is not in the cache (scripts/fetch_instruct_model.py)")
def test_an_instruct_model_labels_without_the_warning():
    with newrllama.Model(SMALL.name) as model, warnings.catch_warnings():
        assert model.has_chat_template
        warnings.simplefilter("error", newrllama.BaseModelWarning)
        assert newrllama.annotate(["OPEC cut its crude output."], LABELS, INSTRUCTION, model=model,
                                  n_threads=2)[0].label in LABELS
