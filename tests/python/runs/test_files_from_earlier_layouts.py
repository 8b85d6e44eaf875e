"""Files written by the code before the subpackage layout (commit 2e13e8c, tests/python/runs/data/
before_subpackages) still load: a calibration, and results files that a resume reads back whole."""
import shutil
from pathlib import Path

import newrllama

BEFORE = Path(__file__).resolve().parent / "data" / "before_subpackages"
# What wrote them (the script's call, repeated here as a resume must repeat it).
TEXTS = ["Texaco agreed to buy Getty Oil for 10 billion dollars.", "OPEC cut its crude output again.",
         "The bank raised its prime rate.", "Shell bought a stake in a refinery.", "Crude prices fell for a week.",
         "Citicorp raised rates on loans."]
LABELS = ["acquisition", "crude oil", "interest rates"]
INSTRUCTION = "Give the topic of the news story."
PROMPTS = ["The capital of France is", "Two plus two is"]


def test_a_calibration_and_results_files_written_before_load_and_resume_with_nothing_to_run(model, tmp_path):
    for name in ("annotations.jsonl", "answers.jsonl"):
        shutil.copy(BEFORE / name, tmp_path / name)
    calibration = newrllama.Calibration.load(BEFORE / "calibration.json")
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        # "reverse" was the default debias method when they were written; the file records it, so a resume names it.
        labelled = newrllama.annotate(TEXTS, LABELS, INSTRUCTION, context=ctx, output=tmp_path / "annotations.jsonl",
                                      resume=True, progress=False, debias="reverse")
        answers = ctx.generate_parallel(PROMPTS, newrllama.SamplingParams(max_tokens=4),
                                        output=tmp_path / "answers.jsonl", resume=True)
        assert ctx.engine_stats().n_steps == 0, "everything was read back"
    assert all(a.label in LABELS and abs(sum(a.probs.values()) - 1) < 1e-9 for a in labelled)
    assert [c.finish_reason for c in answers] == ["length", "length"] and all(c.text for c in answers)
    calibrated = calibration.apply(labelled)  # the labels' provenance matches what it was fitted on
    assert [a.label for a in calibrated] and all(a.label in LABELS for a in calibrated)
    for name in ("annotations.jsonl", "answers.jsonl"):
        assert (tmp_path / name).read_bytes() == (BEFORE / name).read_bytes(), "a resume with nothing to do writes nothing"
