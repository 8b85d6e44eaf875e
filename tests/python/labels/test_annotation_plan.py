"""plan_annotation(): tokens per text counted as the tokenizer counts them, the texts that do not fit, the context,
its memory and a time estimate from a timed sample, before a run."""
from __future__ import annotations

import sys

import pytest

import newrllama
from newrllama.labels.codebook import check_codebook

LABELS = ["sports", "business"]
LONG = "The striker scored twice and the home team won the cup final." + " The report went on." * 120
SHORT = "Shares of the bank fell after weak profits for the third quarter, the second fall this year."
TEXTS = [LONG, SHORT, None, "Heavy rain is expected tomorrow in the north of the country and on the coast."]
SETTINGS = dict(n_ctx=512, n_seq_max=2, n_threads=2)


def test_the_plan_counts_tokens_as_the_tokenizer_and_cuts_as_annotate(model):
    with newrllama.Context(model, **SETTINGS) as ctx:
        plan = newrllama.plan_annotation(TEXTS, LABELS, context=ctx, debias="none", too_long="truncate_end",
                                         sample=2)
        labelled = newrllama.annotate(TEXTS, LABELS, context=ctx, debias="none", too_long="truncate_end")
        cells = ctx.n_ctx_seq
    assert plan.text_tokens == [len(model.tokenize(t, add_special=False)) if t else None for t in TEXTS]
    book = check_codebook(LABELS, "")
    assert plan.prompt_tokens[1] == len(model.tokenize(book.prompt(model, SHORT)))
    assert plan.prompt_tokens[2] is None and plan.errors[2] == "text is missing or empty"
    assert plan.tokens_cut == [a.tokens_cut for a in labelled] and plan.tokens_cut[0] > 0
    assert plan.too_long_texts == [0] and max(p for p in plan.prompt_tokens if p) < cells
    assert (plan.n_ctx, plan.n_seq_max, plan.n_prompts) == (512, 2, 3)
    assert plan.context_bytes is None  # a context given is not the plan's to measure
    assert plan.sample == [0, 3] and plan.sample_seconds > 0 and plan.seconds > 0
    assert [row["tokens_cut"] for row in plan.rows()] == plan.tokens_cut
    shown = str(plan)
    assert "4 texts" in shown and "texts that do not fit a sequence whole: 1, which will be cut (truncate_end)" in shown
    assert "n_ctx 512, n_seq_max 2 (256 cells a sequence)" in shown


def test_with_too_long_error_the_plan_names_the_texts_that_will_fail(model):
    with newrllama.Context(model, **SETTINGS) as ctx:
        plan = newrllama.plan_annotation(TEXTS, LABELS, context=ctx, sample=0)
    assert plan.too_long_texts == [0] and "too_long='truncate_end'" in plan.errors[0] and plan.tokens_cut[0] == 0
    assert plan.sample == [] and plan.seconds is None and "not estimated" in str(plan)


def test_without_a_context_the_plan_sizes_one_for_the_corpus_and_measures_its_memory(model):
    plan = newrllama.plan_annotation(TEXTS, LABELS, model=model, n_threads=2, sample=1)
    assert plan.too_long_texts == [] and plan.n_ctx >= max(p for p in plan.prompt_tokens if p) * plan.n_seq_max
    assert plan.model_bytes > 100_000_000
    if sys.platform.startswith("linux"):
        assert plan.context_bytes > 0


def test_bad_arguments_are_refused_before_any_work(model):
    with pytest.raises(newrllama.InvalidArgumentError, match="sample must be a non-negative int"):
        newrllama.plan_annotation(TEXTS, LABELS, model=model, sample=-1)
    with pytest.raises(newrllama.InvalidArgumentError, match="too_long must be one of"):
        newrllama.plan_annotation(TEXTS, LABELS, model=model, too_long="shorten")
    with pytest.raises(newrllama.InvalidArgumentError, match="texts must be"):
        newrllama.plan_annotation("one text", LABELS, model=model)
