"""How long a corpus takes to label, on this machine, as a researcher labels it: annotate() with its defaults (no
context given: one sized for the texts), the recommended instruct model, two labels and an instruction, and the
estimate plan_annotation() gave beforehand from a sample of 8 texts.

Two corpora of real text: the 70 Reuters stories of r-cran-tm as they are, and "long texts" of about 1,000 tokens,
each made of consecutive stories joined (speeches and articles run that long). For each: the texts' tokens (mean
and largest), the seconds annotate() took, seconds per text and per 1,000 text tokens, plan_annotation()'s
estimate beside it, and the hours 20,000 such texts would take at the measured rate (time grows with the tokens).

    .venv/bin/python bench/bench_corpus_time.py [--model PATH] [--long-tokens 1000]
Writes bench/results/corpus-time-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402

LABELS = {"acquisition": "a company buys or merges with another, or a stake in one changes hands",
          "crude oil": "oil prices, production, exports or reserves"}
INSTRUCTION = "Give the topic of the news story."
CORPUS_SIZE = 20_000
PLAN_SAMPLE = 8


def long_texts(model: newrllama.Model, stories: List[str], tokens: int) -> List[str]:
    """Consecutive stories joined until each text reaches ``tokens`` tokens (the last, shorter one dropped)."""
    out, current, n = [], [], 0
    for story in stories:
        current.append(story)
        n += len(model.tokenize(story, add_special=False))
        if n >= tokens:
            out.append("\n\n".join(current))
            current, n = [], 0
    return out


def measure(model: newrllama.Model, texts: List[str]) -> Dict[str, float]:
    sizes = [len(model.tokenize(t, add_special=False)) for t in texts]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", newrllama.AnnotationWarning)
        plan = newrllama.plan_annotation(texts, LABELS, INSTRUCTION, model=model, sample=PLAN_SAMPLE)
        t0 = time.perf_counter()
        done = newrllama.annotate(texts, LABELS, INSTRUCTION, model=model)
        seconds = time.perf_counter() - t0
    per_text = seconds / len(texts)
    return {"texts": len(texts), "mean_tokens": statistics.mean(sizes), "max_tokens": max(sizes),
            "failed": sum(a.label is None for a in done), "seconds": seconds, "seconds_per_text": per_text,
            "seconds_per_1000_tokens": 1000 * seconds / sum(sizes), "plan_seconds": plan.seconds,
            "plan_context": [plan.n_ctx, plan.n_seq_max],
            f"hours_for_{CORPUS_SIZE}": per_text * CORPUS_SIZE / 3600}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="default: the recommended 1.5B instruct model")
    ap.add_argument("--long-tokens", type=int, default=1000)
    args = ap.parse_args()
    path = args.model or instruct_model_path("qwen2.5-coder-1.5b")
    stories = [text for text, _ in reuters_stories()]
    with newrllama.Model(path) as model:
        with warnings.catch_warnings():  # a warm-up: the first call pays for the pages of the weights
            warnings.simplefilter("ignore", newrllama.AnnotationWarning)
            newrllama.annotate(stories[:2], LABELS, INSTRUCTION, model=model)
        corpora = {"reuters stories": stories, f"long texts (~{args.long_tokens} tokens)":
                   long_texts(model, stories, args.long_tokens)}
        results = {name: measure(model, texts) for name, texts in corpora.items()}
    write_results("corpus-time", {"model": Path(path).name, "labels": list(LABELS), "corpus_size": CORPUS_SIZE,
                                  "plan_sample": PLAN_SAMPLE, "corpora": results})


if __name__ == "__main__":
    main()
