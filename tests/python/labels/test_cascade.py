"""A cascade: the embedded base model labels every text, the instruct model the ones the first is least sure of.

The tests with both models need the instruct model (NEWRLLAMA_TEST_INSTRUCT=true, as scripts/test.sh sets)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import newrllama

ROOT = Path(__file__).resolve().parents[3]


LABELS = ["acquisition", "crude oil"]
INSTRUCTION = "Give the topic of the news story."
TEXTS = ["Texaco agreed to buy Getty Oil for $10 billion.", "OPEC ministers agreed to cut crude output.",
         "Shares of the acquired firm rose after the takeover bid.", "Brent crude fell two dollars a barrel.",
         "The bank bought a stake in the insurer.", "Saudi Arabia raised its oil exports.",
         "Chevron will merge with Gulf in a stock deal.", "Refiners paid more for North Sea oil.",
         "The board rejected the hostile offer.", "Crude stocks in Cushing rose last week."]


@pytest.fixture(scope="module")
def contexts(model):
    if os.environ.get("NEWRLLAMA_TEST_INSTRUCT") != "true":
        pytest.skip("set NEWRLLAMA_TEST_INSTRUCT=true to test with the instruct model")
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_instruct_model import instruct_model_path
    with newrllama.Model(instruct_model_path()) as instruct, \
            newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as small, \
            newrllama.Context(instruct, n_ctx=2048, n_seq_max=4, n_threads=2) as large:
        yield small, large


def test_the_least_sure_texts_get_the_second_model_s_labels_and_say_so(contexts):
    small, large = contexts
    first = newrllama.annotate(TEXTS, LABELS, INSTRUCTION, context=small)
    by_doubt = sorted(range(len(TEXTS)), key=lambda i: (first[i].margin, i))
    sent = sorted(by_doubt[:3])
    out = newrllama.annotate(TEXTS, LABELS, INSTRUCTION, context=small,
                             cascade=newrllama.Cascade(large, share=0.3))
    again = newrllama.annotate([TEXTS[i] for i in sent], LABELS, INSTRUCTION, context=large)
    for i, a in enumerate(out):
        expected = again[sent.index(i)] if i in sent else first[i]
        assert (a.label, a.probs, a.order_flip) == (expected.label, expected.probs, expected.order_flip)
        assert a.provenance.model_sha256 == expected.provenance.model_sha256
    assert {out[i].provenance.model_file for i in sent} == {os.path.basename(large.model.identity().path)}
    assert {a.provenance.model_file for a in out} == {"gemma-3-270m-q4_k_m.gguf", os.path.basename(large.model.identity().path)}
    record = out[0].provenance.cascade
    assert (record["n_second"], record["n_labelled_first"], record["share"]) == (3, 10, 0.3)
    assert record["first_model_sha256"] == first[0].provenance.model_sha256
    text = newrllama.methods_text(out)
    assert "gemma-3-270m-q4_k_m.gguf" in text and os.path.basename(large.model.identity().path) in text
    assert "A cascade then labelled the 30% of texts with the smallest margin" in text and "3 of 10 texts" in text
    threshold = sorted(a.margin for a in first)[4]
    by_threshold = newrllama.annotate(TEXTS, LABELS, INSTRUCTION, context=small,
                                      cascade=newrllama.Cascade(large, threshold=threshold))
    assert by_threshold[0].provenance.cascade["n_second"] == sum(a.margin < threshold for a in first) == 4
    truth = [t if i % 2 == 0 else None for i, t in enumerate(["acquisition", "crude oil"] * 5)]
    assert newrllama.prevalence(out, truth).share("crude oil").n_coded == 5


def test_a_cascade_that_cannot_run_is_refused_before_any_work(contexts, tmp_path):
    small, large = contexts
    stats = small.last_stats
    for kwargs, message in [({"share": 0}, r"share must be a number in \(0, 1\]"),
                            ({"share": 0.2, "threshold": 0.1}, "one of them"), ({}, "one of them"),
                            ({"threshold": True}, "threshold must be a number")]:
        with pytest.raises(newrllama.InvalidArgumentError, match=message):
            newrllama.Cascade(large, **kwargs)
    with pytest.raises(newrllama.InvalidArgumentError, match="a Context, a Cluster, a Model, or a GGUF path"):
        newrllama.Cascade(42, share=0.5)
    cascade = newrllama.Cascade(large, share=0.5)
    for kwargs, message in [({"codebook": {"topic": LABELS}, "labels": None}, "one question"),
                            ({"calibration": "pending"}, "leave calibration out"),
                            ({"output": tmp_path / "out.jsonl"}, "does not write an output file")]:
        with pytest.raises(newrllama.InvalidArgumentError, match=message):
            newrllama.annotate(TEXTS, **{"labels": LABELS, **kwargs}, context=small, cascade=cascade)
    with pytest.raises(newrllama.InvalidArgumentError, match="cascade must be a newrllama.Cascade"):
        newrllama.annotate(TEXTS, LABELS, context=small, cascade=large)
    assert small.last_stats is stats and not (tmp_path / "out.jsonl").exists()


def test_the_plan_times_both_stages(contexts):
    small, large = contexts
    alone = newrllama.plan_annotation(TEXTS, LABELS, INSTRUCTION, context=small, sample=4)
    plan = newrllama.plan_annotation(TEXTS, LABELS, INSTRUCTION, context=small, sample=4,
                                     cascade=newrllama.Cascade(large, share=0.3))
    assert plan.second_share == 0.3 and 0 < plan.second_seconds < plan.seconds
    assert plan.sample == alone.sample and len(plan.sample_margins) == 4
    assert "of which the cascade's second model about" in str(plan) and "for 30% of the texts" in str(plan)
    wide = newrllama.plan_annotation(TEXTS, LABELS, INSTRUCTION, context=small, sample=4,
                                     cascade=newrllama.Cascade(large, threshold=1.0))
    assert wide.second_share == 1.0
    assert alone.second_seconds is None and "second model" not in str(alone)
    first = plan.seconds - plan.second_seconds
    assert plan.cascade_share_for(plan.seconds) == pytest.approx(0.3)
    assert plan.cascade_share_for(first / 2) == 0.0 and plan.cascade_share_for(1e9) == 1.0
    with pytest.raises(newrllama.InvalidArgumentError, match="plan with cascade="):
        alone.cascade_share_for(10)
    with pytest.raises(newrllama.InvalidArgumentError, match="positive number"):
        plan.cascade_share_for(0)


def test_the_rule_reads_the_first_model_s_margins_alone():
    """Without a model: which texts a cascade sends on, by share (the least sure first, ties to the earlier text,
    rounded up) or threshold, failed texts never."""
    margins = [0.9, 0.1, 0.5, 0.1, None, 0.3]
    first = [newrllama.Annotation(None, error="x") if m is None else
             newrllama.Annotation("a", {"a": (1 + m) / 2, "b": (1 - m) / 2}) for m in margins]
    assert newrllama.Cascade("second.gguf", share=0.4).chosen(first) == [1, 3]
    assert newrllama.Cascade("second.gguf", share=0.5).chosen(first) == [1, 3, 5]
    assert newrllama.Cascade("second.gguf", share=0.2).chosen(first) == [1]
    assert newrllama.Cascade("second.gguf", share=1).chosen(first) == [0, 1, 2, 3, 5]
    assert newrllama.Cascade("second.gguf", threshold=0.4).chosen(first) == [1, 3, 5]
