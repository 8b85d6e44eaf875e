"""calibrate(): a small correction of label scores fitted on coded texts, with cross-validated figures."""
from __future__ import annotations

import dataclasses
import math
import random

import pandas
import pytest

import newrllama
from newrllama.labels.annotation import Annotation
from newrllama.labels.calibration import FITTED_PENALTIES, NO_CALIBRATION

LABELS = ("acquisition", "crude oil")


def leaning(n, shift, seed=0, sharpness=1.0):
    """Annotations whose model leans towards 'acquisition' by ``shift`` in log-odds (and is ``sharpness`` times as
    sure as it should be), and the truth."""
    rng = random.Random(seed)
    out, truth = [], []
    for _ in range(n):
        t = rng.choice(LABELS)
        evidence = rng.gauss(1.5 if t == "crude oil" else -1.5, 1.0)
        p_crude = 1 / (1 + math.exp(-(sharpness * 3 * evidence - shift)))  # 3 * evidence: the true log-odds
        probs = {"acquisition": 1 - p_crude, "crude oil": p_crude}
        out.append(Annotation(max(probs, key=probs.get), probs, None, probs, probs))
        truth.append(t)
    return out, truth


def test_a_leaning_model_is_set_straight_and_says_how_well():
    coded, coded_truth = leaning(40, shift=6.0)
    rest, rest_truth = leaning(300, shift=6.0, seed=1)
    before = newrllama.validate([a.label for a in rest], rest_truth)
    cal = newrllama.calibrate(coded, coded_truth)
    assert cal.offsets["crude oil"] - cal.offsets["acquisition"] > 1.0  # pulls towards the neglected label
    after = newrllama.validate([a.label for a in cal.apply(rest)], rest_truth)
    assert after.kappa > before.kappa + 0.2 and after.kappa > 0.6
    assert cal.n == 40 and 0.5 < cal.cv_accuracy <= 1 and cal.cv_kappa > 0.4
    applied = cal.apply(rest[:3])
    assert [a.raw_probs for a in applied] == [a.raw_probs for a in rest[:3]]
    assert all(sum(a.probs.values()) == pytest.approx(1) for a in applied)
    # Applying twice is applying once: the correction starts from the order-free scores.
    for again, once in zip(cal.apply(applied), applied):
        assert again.probs == pytest.approx(once.probs)


def test_a_calibrated_model_keeps_its_labels():
    coded, truth = leaning(60, shift=0.0, seed=4)
    cal = newrllama.calibrate(coded, truth)
    assert cal.penalty in FITTED_PENALTIES + (NO_CALIBRATION,) and cal.balanced
    assert abs(cal.offsets["crude oil"] - cal.offsets["acquisition"]) < 0.8
    rest, _ = leaning(300, shift=0.0, seed=5)
    same = sum(a.label == b.label for a, b in zip(rest, cal.apply(rest))) / len(rest)
    assert same >= 0.95, same
    # A strong penalty, given, holds the scale near 1 (nearly separable coded texts would sharpen it).
    firm = newrllama.calibrate(coded, truth, penalty=10.0)
    assert firm.penalty == 10.0 and 0.5 < firm.scale < 2


def test_balanced_weights_keep_a_rare_label_in_the_fit():
    """Four crude-oil stories among forty: fitted on the sample's own shares the rare label is given up more
    often than with every label weighed alike (the penalty fixed, so that only the weights differ)."""
    coded, truth = leaning(200, shift=6.0, seed=6)
    keep = [i for i, t in enumerate(truth) if t == "acquisition"][:36] + [i for i, t in enumerate(truth)
                                                                          if t == "crude oil"][:4]
    coded, truth = [coded[i] for i in keep], [truth[i] for i in keep]
    rest, rest_truth = leaning(300, shift=6.0, seed=7)
    recall = {}
    for balanced in (True, False):
        labels = [a.label for a in newrllama.calibrate(coded, truth, balanced=balanced, penalty=1.0).apply(rest)]
        recall[balanced] = sum(p == t == "crude oil" for p, t in zip(labels, rest_truth)) / rest_truth.count("crude oil")
    assert recall[True] > recall[False] + 0.1, recall


def test_failed_texts_and_missing_truth_are_left_out():
    coded, truth = leaning(20, shift=1.0)
    coded[0] = Annotation(None, error="boom")
    truth[1] = None
    assert newrllama.calibrate(coded, truth).n == 18
    assert newrllama.calibrate(coded, truth).apply([coded[0]])[0].error == "boom"


@pytest.mark.parametrize("annotations,truth,kwargs,message", [
    ("x", ["a"], {}, "list of Annotation"), ([1], ["a"], {}, "must be an Annotation"),
    (None, [], {}, "list of Annotation"), ("A2", ["acquisition"], {}, "1 labels but there are 2"),
    ("A2", ["acquisition", "grain"], {}, "not one of the labels"), ("A2", ["acquisition"] * 2, {"penalty": 0}, "penalty"),
    ("A2", ["acquisition"] * 2, {"folds": 1}, "folds"), ("A2", ["acquisition"] * 2, {"balanced": 1}, "balanced"), ("A2", [None, None], {}, "no annotation"),
])
def test_bad_input_is_a_clear_error(annotations, truth, kwargs, message):
    if annotations == "A2":
        annotations = leaning(2, 0.0)[0]
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.calibrate(annotations, truth, **kwargs)


def test_a_calibration_fits_only_its_own_labels():
    coded, truth = leaning(10, 0.0)
    cal = newrllama.calibrate(coded, truth)
    other = Annotation("a", {"a": 0.6, "b": 0.4}, None, {"a": 0.6, "b": 0.4}, {"a": 0.6, "b": 0.4})
    with pytest.raises(newrllama.InvalidArgumentError, match="fitted on the labels"):
        cal.apply([other])
    with pytest.raises(newrllama.InvalidArgumentError, match="fitted on the labels"):
        newrllama.annotate(["a text"], ["a", "b"], calibration=cal)


def test_least_confident_picks_the_smallest_margins():
    annotations = [Annotation("a", {"a": p, "b": 1 - p}) for p in (0.9, 0.55, 0.7, 0.51)] + [Annotation(None, error="x")]
    assert annotations[1].margin == pytest.approx(0.1) and annotations[4].margin is None
    assert newrllama.least_confident(annotations, 2) == [3, 1]
    assert newrllama.least_confident(annotations, 10) == [3, 1, 2, 0]
    with pytest.raises(newrllama.InvalidArgumentError, match="non-negative"):
        newrllama.least_confident(annotations, -1)


TOPICS = ["sports", "business"]
STORIES = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
           "The champion retired after twenty seasons.", "The company bought a rival for two billion dollars."] * 2
STORY_TRUTH = ["sports", "business", "sports", "business"] * 2


def test_annotations_say_what_made_them_and_a_calibration_keeps_it(model, tmp_path):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        done = newrllama.annotate(STORIES, TOPICS, "Give the topic.", context=ctx)
        plain = newrllama.annotate(STORIES, TOPICS, "Give the topic.", context=ctx, debias="none")
        worded = newrllama.annotate(STORIES, TOPICS, "Give the topic of the story.", context=ctx)
    source = done[0].provenance
    assert all(a.provenance == source for a in done)
    assert source.model_sha256 == model.identity().sha256 and source.model_file == "gemma-3-270m-q4_k_m.gguf"
    assert (source.labels, source.instruction, source.debias, source.newrllama) == (tuple(TOPICS), "Give the topic.",
                                                                                     "auto", newrllama.__version__)
    assert source.determinism["batch_invariant"] is True and source.determinism["n_threads"] == 2
    assert worded[0].provenance.codebook_digest != source.codebook_digest
    with pytest.warns(newrllama.AnnotationWarning, match="8 of the 8 coded texts were scored in one order"):
        cal = newrllama.calibrate(done, STORY_TRUTH, folds=2)
    assert cal.fitted_on == source
    path = tmp_path / "cal.json"
    cal.save(path)
    again = newrllama.Calibration.load(path)
    assert again == cal and [a.probs for a in again.apply(done)] == [a.probs for a in cal.apply(done)]
    assert cal.apply(done)[0].provenance == source
    with pytest.raises(newrllama.InvalidArgumentError, match="debias 'auto' here, 'none' there"):
        cal.apply(plain)
    with pytest.raises(newrllama.InvalidArgumentError, match="codebook digest"):
        cal.apply(worded)
    elsewhere = [dataclasses.replace(a, provenance=dataclasses.replace(source, model_sha256="0" * 64)) for a in done]
    with pytest.raises(newrllama.InvalidArgumentError, match="fitted on labels made otherwise .model sha256"):
        cal.apply(elsewhere)
    with pytest.raises(newrllama.InvalidArgumentError, match="made in different ways"):
        newrllama.calibrate(done[:4] + plain[4:], STORY_TRUTH, folds=2)
    # Annotations that do not say where they come from (built by hand) are taken as they are.
    assert cal.apply([dataclasses.replace(a, provenance=None) for a in plain])[0].label in TOPICS


def test_default_labels_to_be_calibrated_take_two_orders_and_keep_to_their_calibration(model):
    """With debias="auto", labels to be calibrated (calibration="pending") or calibrated with a fit on such labels are
    scored in both orders, as "reverse" scores them, so the calibrated default is the calibrated "reverse"; a
    calibration fitted on one order's labels gets its texts scored in one order; the two are never mixed."""
    def topic(texts, ctx, **options):
        return newrllama.annotate(texts, TOPICS, "Give the topic.", context=ctx, **options)

    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        pending = topic(STORIES, ctx, calibration="pending")
        assert ctx.last_stats.n_prompts == 2 * len(STORIES), "two orders, no content-free texts"
        reverse = topic(STORIES, ctx, debias="reverse")
        one_order = topic(STORIES, ctx)
        cal = newrllama.calibrate(pending[:6], STORY_TRUTH[:6], folds=2, penalty=1.0)
        rest = topic(STORIES[6:], ctx, calibration=cal)
        assert ctx.last_stats.n_prompts == 2 * 2
        with pytest.warns(newrllama.AnnotationWarning, match="scored in one order"):
            one_cal = newrllama.calibrate(one_order[:6], STORY_TRUTH[:6], folds=2, penalty=1.0)
        rest_one = topic(STORIES[6:], ctx, calibration=one_cal)
    assert [(a.probs, a.raw_probs) for a in pending] == [(a.probs, a.raw_probs) for a in reverse]
    assert all(a.order_flip is not None for a in pending) and all(a.order_flip is None for a in one_order)
    assert {(a.provenance.debias, a.provenance.for_calibration) for a in pending} == {("auto", True)}
    reverse_cal = newrllama.calibrate(reverse[:6], STORY_TRUTH[:6], folds=2, penalty=1.0)
    assert (cal.scale, cal.offsets) == (reverse_cal.scale, reverse_cal.offsets)
    assert [a.probs for a in rest] == [a.probs for a in reverse_cal.apply(reverse[6:])]
    assert [a.order_free_probs for a in rest_one] == [a.probs for a in one_order[6:]]
    assert not rest_one[0].provenance.for_calibration
    with pytest.raises(newrllama.InvalidArgumentError, match=r"one order here, in two for calibration there.*"
                                                             r"calibration='pending'"):
        one_cal.apply(pending)
    with pytest.raises(newrllama.InvalidArgumentError, match="two orders for calibration here, in one there"):
        cal.apply(one_order)
    text = newrllama.methods_text(pending)
    assert "averaging the scores of the list and of its reverse" in text and "contextual calibration" not in text
    with pytest.raises(newrllama.InvalidArgumentError, match="or be 'pending' for labels to be calibrated later"):
        newrllama.annotate(STORIES, TOPICS, calibration="later", model=model)
    with pytest.raises(newrllama.InvalidArgumentError, match="is a data frame: pass one of its columns"):
        newrllama.AnnotationTask(TOPICS, calibration=pandas.DataFrame({"cal": [1]}))


def test_human_codes_as_the_calibration_score_two_orders_and_calibrate_on_the_coded_texts(model, tmp_path):
    """The flow of a researcher who codes a sample after a first run: calibrate() on labels scored in one order says
    how to do better, and annotate(..., calibration=codes) gives in one call what scoring with "pending", calibrate()
    on the coded texts and apply() give, resumed from its file with more texts coded."""
    def topic(texts, ctx, **options):
        return newrllama.annotate(texts, TOPICS, "Give the topic.", context=ctx, **options)

    def same(a, b):
        return [(x.label, x.probs, x.order_free_probs, x.order_flip) for x in a] == \
            [(x.label, x.probs, x.order_free_probs, x.order_flip) for x in b]

    coded = STORY_TRUTH[:6] + [None, None]
    filed_by_one_coder = ["business"] * 6 + [None, None]  # a coder at odds with the model: the fit moves labels
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        first = topic(STORIES, ctx)
        with pytest.warns(newrllama.AnnotationWarning, match=r"6 of the 6 coded texts were scored in one order.*"
                                                              r"human codes as the calibration"):
            newrllama.calibrate(first, coded)
        pending = topic(STORIES, ctx, calibration="pending")
        for codes in (coded, filed_by_one_coder):
            natural = topic(STORIES, ctx, calibration=codes)
            assert ctx.last_stats.n_prompts == 2 * len(STORIES)
            assert same(natural, newrllama.calibrate(pending, codes).apply(pending))
            assert {(a.provenance.debias, a.provenance.for_calibration) for a in natural} == {("auto", True)}
        assert newrllama.calibrate(pending, filed_by_one_coder).calibrated
        assert [a.label for a in natural] != [a.label for a in pending]
        out = tmp_path / "labels.jsonl"
        topic(STORIES[:4], ctx, calibration=coded[:4], output=out)
        resumed = topic(STORIES, ctx, calibration=filed_by_one_coder, output=out, resume=True)
        assert ctx.last_stats.n_prompts == 2 * 4, "the file's four texts were not scored again"
        assert same(resumed, natural)
        table = newrllama.annotate(pandas.DataFrame({"text": STORIES, "code": filed_by_one_coder}), TOPICS,
                                   "Give the topic.", context=ctx, column="text",
                                   calibration=pandas.DataFrame({"code": filed_by_one_coder})["code"])
        assert list(table[".label"]) == [a.label for a in natural]
        before = ctx.last_stats
        for codes, message in [(coded[:3], "holds 3 codes for 8 texts"), (["sports", "politics"] + [None] * 6,
                                                                           "hold 'politics', not among the labels"),
                               ([None] * 8, "hold no coded text")]:
            with pytest.raises(newrllama.InvalidArgumentError, match=message):
                topic(STORIES, ctx, calibration=codes)
        assert ctx.last_stats is before, "a bad calibration is refused before any work"


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON"), ('{"format": "other"}', "not a newrllama calibration"),
    ('{"format": "newrllama-calibration-1", "labels": ["a"]}', "lacks or garbles"),
])
def test_a_file_that_is_not_a_calibration_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.Calibration.load(path)
    with pytest.raises(newrllama.InvalidArgumentError, match="cannot read the calibration file"):
        newrllama.Calibration.load(tmp_path / "missing.json")


def test_a_methods_paragraph_names_the_model_the_prompt_the_debias_method_and_the_estimate(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        done = newrllama.annotate(STORIES, TOPICS, "Give the topic.", context=ctx, debias="reverse")
        by_default = newrllama.annotate(STORIES, TOPICS, "Give the topic.", context=ctx)
    # The default ("auto") scores these short stories once each, with contextual calibration: no order to flip.
    auto_text = newrllama.methods_text(by_default)
    assert "for texts shorter than two lists of labels" in auto_text and "contextual calibration" in auto_text
    assert all(a.order_flip is None for a in by_default) and "changed with the listing order" not in auto_text
    cal = newrllama.calibrate(done, STORY_TRUTH, folds=2, penalty=1.0)  # a fit, whatever the coded texts say
    codes = [t if i % 2 == 0 else None for i, t in enumerate(STORY_TRUTH)]
    text = newrllama.methods_text(cal.apply(done), codes, calibration=cal)
    source = done[0].provenance
    share = newrllama.prevalence(cal.apply(done), codes).share("sports")
    for piece in (f"newrllama {newrllama.__version__}", "gemma-3-270m-q4_k_m.gguf", source.model_sha256,
                  'instruction "Give the topic."', '2 labels ("sports", "business")', source.codebook_digest,
                  "the list and of its reverse", "batch-invariant", "with 2 threads", "8 of 8 texts received a label",
                  "calibrated on 8 hand-coded texts", f"cross-validated accuracy {cal.cv_accuracy:.2f}",
                  "A simple random sample of 4 of the 8 texts", "PPI++",
                  f"sports {share.estimate:.3f} [{share.lower:.3f}, {share.upper:.3f}]"):
        assert piece in text, piece
    flips = sum(a.order_flip for a in done)
    assert f"for {flips} of 8 texts" in text
    assert "offloaded" not in text
    offloaded = dataclasses.replace(source, determinism={**source.determinism, "batch_invariant": False,
                                                         "backend": "cuda", "n_gpu_layers": 20,
                                                         "device": "CUDA0: NVIDIA H200"})
    on_gpu = newrllama.methods_text([dataclasses.replace(a, provenance=offloaded) for a in done])
    assert ("not batch-invariant, with 2 threads, 20 layers offloaded to cuda (device CUDA0: NVIDIA H200) on "
            "llama-cpp-python") in on_gpu
    plain = dataclasses.replace(source, instruction="")
    no_instruction = newrllama.methods_text([dataclasses.replace(a, provenance=plain) for a in done])
    assert "Each text was followed by the list of 2 labels" in no_instruction
    bare = newrllama.methods_text([dataclasses.replace(a, provenance=None, order_flip=None) for a in done])
    assert bare == ("Texts were labelled with newrllama (the annotations do not record the model or the prompt). "
                    "8 of 8 texts received a label.")
    with pytest.raises(newrllama.InvalidArgumentError, match="every text failed"):
        newrllama.methods_text([newrllama.Annotation(None, error="x")])


def test_the_coded_texts_choose_no_calibration_where_the_model_is_already_calibrated():
    # A model whose probabilities are the true ones: most coded samples leave them as they are; a leaning model's
    # never do.
    chosen = [newrllama.calibrate(*leaning(30, shift=0.0, seed=s)) for s in range(10)]
    assert sum(not c.calibrated for c in chosen) >= 5
    none = next(c for c in chosen if not c.calibrated)
    assert math.isinf(none.penalty) and none.scale == 1.0 and set(none.offsets.values()) == {0.0}
    rest, _ = leaning(20, shift=0.0, seed=11)
    assert [a.probs["crude oil"] for a in none.apply(rest)] == pytest.approx([a.probs["crude oil"] for a in rest])
    assert newrllama.Calibration.from_dict(none.to_dict()) == none
    assert all(newrllama.calibrate(*leaning(30, shift=6.0, seed=s)).calibrated for s in range(10))


def test_a_fit_that_would_not_change_the_held_out_labels_for_the_better_is_not_applied():
    # An overconfident model that orders the texts well: a fit predicts the coded texts' probabilities better
    # (it would soften them) but gives the held-out texts no better labels, so the coded texts keep them as they are.
    samples = [leaning(30, shift=0.0, seed=s, sharpness=4.0) for s in range(10)]
    assert sum(newrllama.calibrate(*s, penalty=1.0).scale < 0.6 for s in samples) >= 8
    chosen = [newrllama.calibrate(*s) for s in samples]
    assert sum(not c.calibrated for c in chosen) >= 8
    none = next(c for c in chosen if not c.calibrated)
    assert none.criterion == "kappa" and newrllama.Calibration.from_dict(none.to_dict()) == none
    assert ("was considered and not applied: the model's own labels agreed with the held-out coded texts' codes at "
            "least as well as a calibration's (cross-validated Cohen's kappa;") in newrllama.methods_text(
                samples[0][0], calibration=none)
    # Deciding by the probabilities, a fit is applied to most of the same samples.
    assert sum(newrllama.calibrate(*s, criterion="log-loss").calibrated for s in samples) >= 6
    with pytest.raises(newrllama.InvalidArgumentError, match="criterion must be one of"):
        newrllama.calibrate(*samples[0], criterion="accuracy")
