"""Several questions per text: what three questions cost against one, on 64 Reuters stories of r-cran-tm
(cut at 1,500 characters), the embedded model, 16 sequences, 2 threads.

annotate(codebook=...) puts each text before its question, so a text's prompts (its questions, each in
both listing orders) share its tokens through the prefix cache. One question and three questions are run
in turn, each on a new context, `--repeats` times after a warm-up; the ratio is the median of the ratios
within a repeat.
Beside them, the same three questions asked as three separate one-question calls (each text decoded
once per question).

    .venv/bin/python bench/bench_questions.py [--docs 64] [--repeats 3]
Writes bench/results/questions-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from reuters import reuters_stories  # noqa: E402

QUESTIONS = {"topic": ["acquisition", "crude oil", "earnings"],
             "tone": {"positive": "good news for the companies named", "negative": "bad news for them",
                      "neutral": "neither"},
             "region": ["North America", "Europe", "Middle East", "Asia", "elsewhere"]}
CUT = 1500


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    texts = [t[:CUT] for t, _ in reuters_stories()[: args.docs]]
    one = {"topic": QUESTIONS["topic"]}
    runs = {"one question": lambda ctx: newrllama.annotate(texts, codebook=one, context=ctx),
            "three questions": lambda ctx: newrllama.annotate(texts, codebook=QUESTIONS, context=ctx),
            "three separate calls": lambda ctx: [newrllama.annotate(texts, codebook={q: labels}, context=ctx)
                                                 for q, labels in QUESTIONS.items()]}
    seconds = {name: [] for name in runs}
    with newrllama.Model() as model:
        def context():  # each run on a new context: nothing cached from the run before
            return newrllama.Context(model, n_ctx=16 * 1024, n_seq_max=16, n_threads=2)
        with context() as ctx:
            newrllama.annotate(texts[:16], codebook=QUESTIONS, context=ctx)  # warm-up at full width
        for _ in range(args.repeats):
            for name, run in runs.items():
                with context() as ctx:
                    t0 = time.perf_counter()
                    run(ctx)
                    seconds[name].append(time.perf_counter() - t0)
    base = seconds["one question"]
    report = {"docs": len(texts), "repeats": args.repeats, "questions": list(QUESTIONS),
              "runs": {name: {"seconds": s, "median_s": statistics.median(s),
                              "over_one": statistics.median(a / b for a, b in zip(s, base))}
                       for name, s in seconds.items()}}
    for name, r in report["runs"].items():
        print(f"{name:>21}: {r['median_s']:.1f} s for {len(texts)} stories, {r['over_one']:.2f}x one question")
    write_results("questions", report)

if __name__ == "__main__":
    main()
