"""robustness(): the variants tried around the baseline, the verdict from their intervals, and a real run on the
Reuters stories of r-cran-tm with the instruct model (labelled again under each variant)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import newrllama
from newrllama.findings.ppi import Interval
from newrllama.findings.robustness import judge, variants

ROOT = Path(__file__).resolve().parents[3]


def test_the_variants_change_one_choice_at_a_time_around_the_baseline():
    runs = variants(["Give the topic.", "What is this story about?"], models=["other.gguf"])
    assert [(v.changed, v.instruction, v.debias, v.reverse_labels, v.model) for v in runs] == [
        ("baseline", "Give the topic.", "auto", False, None),
        ("instruction", "What is this story about?", "auto", False, None),
        ("model", "Give the topic.", "auto", False, "other.gguf"),
        ("debias", "Give the topic.", "reverse", False, None),
        ("listing order", "Give the topic.", "none", False, None),
        ("listing order", "Give the topic.", "none", True, None)]
    assert [v.changed for v in variants("x", debias="reverse")] == ["baseline", "listing order", "listing order"]
    with pytest.raises(newrllama.InvalidArgumentError, match="debias_variants must be among"):
        variants("x", debias_variants=["rotations"])
    with pytest.raises(newrllama.InvalidArgumentError, match="instruction must be a string"):
        variants([])


def test_the_old_name_of_debias_variants_still_works_and_warns():
    with pytest.warns(newrllama.NewrllamaDeprecationWarning, match="debias_variants"), \
            pytest.raises(newrllama.InvalidArgumentError, match="debias_variants must be among"):
        newrllama.robustness(["a text"], ["a", "b"], "Give the topic.", lambda a: a, cures=["rotations"])


def test_the_verdict_reads_each_interval_against_the_baseline_and_null():
    runs = variants(["a", "b", "c"], debias_variants=())
    held = judge("a difference", runs, [Interval(0.20, 0.05, 0.10, 0.30), Interval(0.25, 0.05, 0.15, 0.35),
                                        Interval(0.12, 0.05, 0.02, 0.22)])
    assert held.estimate_holds and held.sign_holds and held.significance_holds
    moved = judge("a difference", runs, [Interval(0.20, 0.05, 0.10, 0.30), Interval(0.35, 0.05, 0.25, 0.45),
                                         Interval(0.05, 0.05, -0.05, 0.15)])
    assert not moved.estimate_holds and moved.sign_holds and not moved.significance_holds
    assert [e.within_baseline for e in moved.estimates] == [True, False, False]
    flipped = judge("a difference", runs, [Interval(0.20, 0.05, 0.10, 0.30), Interval(0.15, 0.05, 0.05, 0.25),
                                           Interval(-0.02, 0.05, -0.12, 0.08)])
    assert [e.same_sign for e in flipped.estimates] == [True, True, False] and not flipped.sign_holds
    unjudged = judge("a share", runs, [Interval(0.5, 0.1, 0.3, 0.7)] * 3, null=None)
    assert unjudged.sign_holds is None and unjudged.significance_holds is None and unjudged.estimate_holds
    assert unjudged.to_pandas().shape == (3, 8)
    assert "under 2 variants, one choice at a time (instruction)" in moved.sentence()
    assert "stayed within the baseline's interval under 0 of 2, its sign against 0 held under 2, and its " \
           "significance under 1" in moved.sentence()
    with pytest.raises(newrllama.InvalidArgumentError, match="2 estimates for 3 variants"):
        judge("x", runs, [Interval(0, 0, 0, 0)] * 2)
    with pytest.raises(newrllama.InvalidArgumentError, match="must give an estimate with its interval"):
        judge("x", runs, [0.1, 0.2, 0.3])


def test_bad_arguments_fail_before_any_labelling():
    with pytest.raises(newrllama.InvalidArgumentError, match="finding must be a function"):
        newrllama.robustness(["a text"], ["x", "y"], "Give the label.", finding=0.5)
    with pytest.raises(newrllama.InvalidArgumentError, match="robustness must be a Robustness"):
        newrllama.methods_text([newrllama.Annotation("x", {"x": 0.9, "y": 0.1})], robustness="held")


CUT = 300   # the headline and first lines: six labellings of 16 stories in a minute or two on two cores
INSTRUCTIONS = ["You are coding Reuters news stories for a content analysis. Decide the topic of the story.",
                "Read the news story and say which topic it is mainly about."]
DEFINITIONS = {"acquisition": "mainly about a company buying, merging with or taking a stake in another company",
               "crude oil": "mainly about oil prices, oil production or the oil industry"}


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NEWRLLAMA_TEST_INSTRUCT") != "true",
                    reason="set NEWRLLAMA_TEST_INSTRUCT=true to test with the instruct model")
def test_a_share_on_the_reuters_stories_is_reestimated_under_each_variant():
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "scripts"))
    from reuters import reuters_stories
    from fetch_instruct_model import instruct_model_path
    stories = reuters_stories()
    picked = [s for s in stories if s[1] == "acquisition"][:8] + [s for s in stories if s[1] == "crude oil"][:8]
    texts = [t[:CUT] for t, _ in picked]
    truth = [label if i % 2 == 0 else None for i, (_, label) in enumerate(picked)]  # every other story coded

    def crude_share(annotations):
        return newrllama.prevalence(annotations, truth).share("crude oil")

    with newrllama.Model(instruct_model_path()) as model, \
            newrllama.Context(model, n_ctx=8 * 1024, n_seq_max=8, n_threads=2) as ctx:
        result = newrllama.robustness(texts, DEFINITIONS, INSTRUCTIONS, crude_share, name="the share of crude oil",
                                      null=None, context=ctx)
        reversed_listing = newrllama.annotate(texts, dict(reversed(list(DEFINITIONS.items()))), INSTRUCTIONS[0],
                                              debias="none", context=ctx)
    names = [e.name for e in result.estimates]
    assert names == ["baseline", "instruction 2", "debias 'reverse' (both listing orders)",
                     "debias 'none', labels listed as given", "debias 'none', labels listed reversed"]
    # each variant is the labelling it names, bit for bit
    assert result.estimates[4].estimate == crude_share(reversed_listing).estimate
    base = result.estimates[0]
    assert 0 <= base.lower <= base.estimate <= base.upper <= 1
    assert [e.within_baseline for e in result.estimates] == [base.lower <= e.estimate <= base.upper
                                                             for e in result.estimates]
    assert result.sign_holds is None and result.estimate_holds == all(e.within_baseline for e in result.estimates)
    text = newrllama.methods_text(reversed_listing, truth, robustness=result)
    assert text.endswith(result.sentence())
    assert "labelled again under 4 variants, one choice at a time (debias, instruction, listing order)" in text
