"""Columns of pandas and polars data frames (and NumPy arrays) taken wherever a list of texts, prompts, ids or labels
is, with their missing values read as missing; a whole frame refused with a message that says what to pass; and
results given back as pandas or polars tables."""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import polars as pl
import pytest

import newrllama

LABELS = ["sports", "business", "weather"]
TEXTS = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
         None, "Heavy rain and strong winds are expected tomorrow."]
PREDICTED = ["a", "b", "a", "b", "a", "a"]
TRUTH = ["a", "b", "b", None, "a", "a"]


@pytest.mark.parametrize("column", [pd.Series, pl.Series, lambda v: np.array(v, dtype=object)],
                         ids=["pandas", "polars", "numpy"])
def test_validate_reads_a_series_as_the_list_it_holds(column):
    assert newrllama.validate(column(PREDICTED), column(TRUTH)) == newrllama.validate(PREDICTED, TRUTH)


def test_pandas_missing_values_of_every_kind_are_missing():
    nan_truth = pd.Series(["a", "b", "b", np.nan, "a", "a"])
    na_truth = pd.Series(["a", "b", "b", pd.NA, "a", "a"], dtype="string")
    expected = newrllama.validate(PREDICTED, TRUTH)
    assert newrllama.validate(PREDICTED, nan_truth) == expected
    assert newrllama.validate(PREDICTED, na_truth) == expected
    assert expected.n == 5


@pytest.mark.parametrize("frame", [pd.DataFrame({"text": TEXTS}), pl.DataFrame({"text": TEXTS})],
                         ids=["pandas", "polars"])
def test_a_data_frame_without_its_column_or_with_a_wrong_one_is_refused_with_what_to_pass(frame):
    with pytest.raises(newrllama.InvalidArgumentError, match=r"texts is a data frame: name its column of texts "
                                                             r"\(column=\"text\"\).*or pass the column itself"):
        newrllama.annotate(frame, LABELS)
    with pytest.raises(newrllama.InvalidArgumentError, match=r"no column 'body'; its columns: text"):
        newrllama.annotate(frame, LABELS, column="body")
    with pytest.raises(newrllama.InvalidArgumentError, match=r"column='text' names a column of a data frame, but "
                                                             r"texts is a list"):
        newrllama.annotate(TEXTS, LABELS, column="text")
    labelled = frame.with_columns(pl.lit("x").alias(".label")) if isinstance(frame, pl.DataFrame) else \
        frame.assign(**{".label": "x"})
    with pytest.raises(newrllama.InvalidArgumentError, match=r"already has the column\(s\) \.label, and the results "
                                                             r"go into columns whose names start with '\.'"):
        newrllama.annotate(labelled, LABELS, column="text", model="/nonexistent.gguf")  # refused before any work


def test_other_shapes_and_kinds_are_refused():
    with pytest.raises(newrllama.InvalidArgumentError, match="one-dimensional"):
        newrllama.validate(np.array([["a", "b"], ["a", "b"]]), ["a", "b"])
    with pytest.raises(newrllama.InvalidArgumentError, match="truth must be a list of labels, not a single string"):
        newrllama.validate(["a"], "a")
    with pytest.raises(newrllama.InvalidArgumentError, match="got set"):
        newrllama.validate({"a"}, ["a"])


def test_a_series_of_texts_is_labelled_as_its_list_is(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        from_list = newrllama.annotate(TEXTS, LABELS, "The topic of the news text.", context=ctx)
        frame = pd.DataFrame({"text": TEXTS, "id": ["s1", "s2", "s3", "s4"]})
        from_pandas = newrllama.annotate(frame["text"], LABELS, "The topic of the news text.", context=ctx)
        from_polars = newrllama.annotate(pl.Series(TEXTS), LABELS, "The topic of the news text.", context=ctx)
        completions = ctx.generate_parallel(pd.Series(["2 + 2 =", "The capital of France is"]),
                                            newrllama.SamplingParams(max_tokens=4))
        assert [c.text for c in completions] == [c.text for c in ctx.generate_parallel(
            ["2 + 2 =", "The capital of France is"], newrllama.SamplingParams(max_tokens=4))]
    assert from_pandas == from_list and from_polars == from_list
    assert from_list[2].label is None and from_list[0].label in LABELS
    table = from_list.to_pandas()
    assert set(table.columns) == {"label", "error", "order_flip", "calibrated", "provenance", "tokens_cut",
                                  *(f"prob_{label}" for label in LABELS)}
    assert [x for x in table["label"] if not pd.isna(x)] == [a.label for a in from_list if a.label is not None]
    assert pd.isna(table["label"][2])
    assert table["prob_sports"].tolist()[0] == from_list[0].probs["sports"] and pd.isna(table["prob_sports"][2])
    assert table["error"].tolist()[2] == from_list[2].error
    assert from_list.to_polars().to_dicts()[1] == {**table.iloc[1].to_dict(), "error": None}


def test_a_data_frame_in_gives_the_same_frame_back_with_the_labels_added(model):
    frame = pd.DataFrame({"text": TEXTS, "id": ["s1", "s2", "s3", "s4"]}, index=[10, 11, 12, 13])
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        from_list = newrllama.annotate(TEXTS, LABELS, "The topic of the news text.", context=ctx)
        out = newrllama.annotate(frame, LABELS, "The topic of the news text.", context=ctx, column="text")
        out_polars = newrllama.annotate(pl.DataFrame({"text": TEXTS, "id": frame["id"].tolist()}), LABELS, "The topic of the news text.", context=ctx,
                                        column="text")
    assert list(frame.columns) == ["text", "id"]  # the caller's frame is left as it was
    assert list(out.index) == [10, 11, 12, 13] and out["id"].tolist() == frame["id"].tolist()
    expected = from_list.to_pandas()
    assert list(out.columns) == ["text", "id"] + ["." + c for c in expected.columns]
    assert out[".label"].tolist()[:2] == [a.label for a in from_list[:2]] and pd.isna(out[".label"][12])
    assert out[".prob_sports"].tolist()[0] == from_list[0].probs["sports"]
    assert out[".error"].tolist()[2] == from_list[2].error
    assert isinstance(out_polars, pl.DataFrame) and out_polars.columns == list(out.columns)
    assert out_polars[".label"].to_list() == [a.label for a in from_list]
    assert out_polars[".prob_sports"].to_list()[0] == from_list[0].probs["sports"]


def _annotation(label, p_a):
    return newrllama.Annotation(label, {"a": p_a, "b": 1 - p_a})


def test_results_become_tidy_tables_in_either_library():
    annotations = newrllama.Annotations(_annotation("a" if i % 3 else "b", 0.8 if i % 3 else 0.3) for i in range(30))
    truth = [a.label if i % 2 else None for i, a in enumerate(annotations)]
    share = newrllama.prevalence(annotations, truth)
    assert share.to_pandas().to_dict("records") == share.rows()
    assert share.to_polars().to_dicts() == share.rows()
    v = newrllama.validate([a.label for a in annotations], [a.label for a in annotations])
    assert v.to_pandas().set_index("label")["support"].to_dict() == {"a": 20, "b": 10}
    assert v.to_polars()["f1"].to_list() == [1.0, 1.0]
    by_question = newrllama.Annotations([{"topic": _annotation("a", 0.9), "tone": newrllama.Annotation(None, error="x")}])
    assert by_question.rows() == [{"topic_label": "a", "topic_prob_a": 0.9, "topic_prob_b": pytest.approx(0.1),
                                   "topic_order_flip": None, "topic_calibrated": False, "topic_provenance": None,
                                   "tone_label": None, "tone_order_flip": None, "tone_calibrated": False,
                                   "tone_provenance": None, "tokens_cut": 0,
                                   "error": "x"}]


def test_a_missing_library_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(newrllama.InvalidArgumentError, match="to_polars\\(\\) needs the polars package"):
        newrllama.Annotations([_annotation("a", 0.9)]).to_polars()
