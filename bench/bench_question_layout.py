"""Where the task goes in the prompt, measured on the 70 Reuters stories of r-cran-tm (cut at 1,500
characters) with the instruct model (scripts/fetch_instruct_model.py).

annotate() has two prompt layouts:
- labels=: the instruction in the system turn, then the text, the labels' definitions and the list of
  labels;
- codebook= (here with one question, "topic"): the instruction in the system turn, then "Text:" and the
  text, then "Question: topic", the definitions and the list (the definitions are decoded once per
  text, after it).
Both are run through annotate() itself, with and without definitions, the same instruction, the default
debias ("reverse"), on one context of 16 sequences: accuracy and kappa with their 95% intervals, the
labels given, and the seconds taken.

    .venv/bin/python bench/bench_question_layout.py
Writes bench/results/question-layout-<date>-<cpu>.json.
"""
from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_validity import CUT, DEFINITIONS, LABELS, N_SEQ, PLAIN_INSTRUCTION  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402


def main() -> None:
    stories = reuters_stories()
    texts = [t[:CUT] for t, _ in stories]
    truth = [label for _, label in stories]
    runs = {"labels=, no definitions": {"labels": list(LABELS)},
            "codebook=, no definitions": {"codebook": {"topic": list(LABELS)}},
            "labels=, definitions": {"labels": DEFINITIONS},
            "codebook=, definitions": {"codebook": {"topic": DEFINITIONS}}}
    report = {"model": Path(instruct_model_path()).name, "stories": len(texts), "cut": CUT,
              "instruction": PLAIN_INSTRUCTION, "runs": {}}
    with newrllama.Model(instruct_model_path()) as model, \
            newrllama.Context(model, n_ctx=N_SEQ * 1024, n_seq_max=N_SEQ, n_threads=2) as ctx:
        for name, how in runs.items():
            t0 = time.perf_counter()
            done = newrllama.annotate(texts, instruction=PLAIN_INSTRUCTION, context=ctx, **how)
            seconds = time.perf_counter() - t0
            labels = [a["topic"].label if isinstance(a, dict) else a.label for a in done]
            v = newrllama.validate(labels, truth)
            given = dict(collections.Counter(labels))
            report["runs"][name] = {"accuracy": v.accuracy, "accuracy_ci": list(v.accuracy_ci), "kappa": v.kappa,
                                    "kappa_ci": list(v.kappa_ci), "labels": given, "seconds": seconds}
            print(f"{name:>26}: accuracy {v.accuracy:.3f} kappa {v.kappa:.3f} "
                  f"[{v.kappa_ci[0]:.2f}, {v.kappa_ci[1]:.2f}] {given} {seconds:.0f} s", flush=True)
    write_results("question-layout", report)


if __name__ == "__main__":
    main()
