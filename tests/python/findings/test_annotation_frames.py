"""The data frame annotate() returns is taken by every estimator as the list of annotations is, with the same
figures; a calibration's results come back as the frame, with the caller's columns kept; a frame of calibrated
probabilities is refused for a new calibration; and plain labels are taken where predictions="labels" says so."""
from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import newrllama
from newrllama.frames import with_columns

LABELS = ["acquisition", "crude oil", "earnings"]
N = 150


def labelled():
    rng = np.random.default_rng(7)
    truth = [str(t) for t in rng.choice(LABELS, size=N, p=[0.5, 0.3, 0.2])]
    out = []
    for t in truth:
        label = t if rng.random() < 0.8 else str(rng.choice([x for x in LABELS if x != t]))
        p = 0.5 * rng.dirichlet(np.ones(3)) + 0.5 * (np.array(LABELS) == label)
        out.append(newrllama.Annotation(label, dict(zip(LABELS, p.tolist())), order_flip=bool(rng.random() < 0.1)))
    out[5] = newrllama.Annotation(None, error="text too long for a sequence")
    codes = [t if i % 3 == 0 else None for i, t in enumerate(truth)]
    return newrllama.Annotations(out), codes


def as_frame(kind, annotations, codes):
    """The caller's frame with the labels' columns added, as annotate(df, column="text") adds them."""
    mine = {"text": [f"story {i}" for i in range(N)], "code": codes}
    frame = pd.DataFrame(mine) if kind == "pandas" else pl.DataFrame(mine)
    return with_columns(frame, annotations, ".")


@pytest.mark.parametrize("kind", ["pandas", "polars"])
def test_every_estimator_takes_the_frame_with_the_list_s_figures(kind):
    annotations, codes = labelled()
    frame = as_frame(kind, annotations, codes)
    codes_column = frame["code"]
    with pytest.warns(newrllama.FailedTextsWarning):
        assert newrllama.prevalence(frame, codes_column).rows() == newrllama.prevalence(annotations, codes).rows()
    with pytest.warns(newrllama.FailedTextsWarning):
        scores = {"acquisition": 1, "crude oil": 2, "earnings": 3}
        assert newrllama.mean_score(frame, codes_column, scores) == newrllama.mean_score(annotations, codes, scores)
    assert newrllama.plan_coding(frame, codes_column, 0.1) == newrllama.plan_coding(annotations, codes, 0.1)
    assert newrllama.least_confident(frame, 7) == newrllama.least_confident(annotations, 7)
    assert newrllama.methods_text(frame, codes_column) == newrllama.methods_text(annotations, codes)
    assert newrllama.calibrate(frame, codes_column).to_dict() == newrllama.calibrate(annotations, codes).to_dict()

    fitted = newrllama.cross_fit(frame, codes_column)
    assert type(fitted) is type(frame) and fitted["text"].to_list() == frame["text"].to_list()
    listed = newrllama.cross_fit(annotations, codes)
    assert [v if isinstance(v, str) else None for v in fitted[".label"].to_list()] == [a.label for a in listed]
    assert fitted[".prob_earnings"].to_list()[:5] == [a.probs["earnings"] for a in listed[:5]]
    # calibrated: whether the probabilities are a calibration's (a fold may choose none, and keep the model's own)
    assert fitted[".calibrated"].to_list() == [a.label is not None and a.probs != b.probs
                                              for a, b in zip(listed, annotations)]
    assert any(fitted[".calibrated"].to_list())
    with pytest.raises(newrllama.InvalidArgumentError, match="holds calibrated probabilities, not the model's own"):
        newrllama.cross_fit(fitted, codes_column)


def test_a_frame_keeps_the_provenance_methods_text_names(ctx):
    frame = pd.DataFrame({"text": ["Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."] * 3})
    out = newrllama.annotate(frame, LABELS[:2], "Give the topic of the news story.", column="text", context=ctx)
    paragraph = newrllama.methods_text(out)
    assert "gemma-3-270m" in paragraph and paragraph == newrllama.methods_text(
        [newrllama.Annotation(label, {k: out[f".prob_{k}"][i] for k in LABELS[:2]}, provenance=source)
         for i, (label, source) in enumerate(zip(out[".label"], [newrllama.labels.provenance.Provenance.from_dict(
             __import__("json").loads(s)) for s in out[".provenance"]]))])


def test_plain_labels_where_predictions_are_labels():
    annotations, codes = labelled()
    labels = [a.label for a in annotations]
    with pytest.warns(newrllama.FailedTextsWarning):
        plain = newrllama.prevalence(labels, codes, predictions="labels")
    with pytest.warns(newrllama.FailedTextsWarning):
        assert plain.rows() == newrllama.prevalence(annotations, codes, predictions="labels").rows()
    with pytest.raises(newrllama.InvalidArgumentError, match="must be an Annotation"):
        newrllama.prevalence(labels, codes)  # the probabilities' estimate needs probabilities


def test_a_frame_without_the_columns_is_a_clear_error():
    annotations, codes = labelled()
    with pytest.raises(newrllama.InvalidArgumentError, match="no column of labels"):
        newrllama.prevalence(pd.DataFrame({"text": ["a"] * N}), codes)
    codebook = pd.DataFrame({".topic_label": ["a"] * N, ".tone_label": ["b"] * N})
    with pytest.raises(newrllama.InvalidArgumentError, match=r"labels of several questions \(topic, tone\)"):
        newrllama.prevalence(codebook, codes)
