"""Several questions per text: what three questions cost against one, on 64 Reuters stories of r-cran-tm
(cut at 1,500 characters), 16 sequences, 2 threads, with the embedded base model or the instruct model.

annotate(codebook=...) puts each text before its question, so a text's prompts (its questions, each in
both listing orders) share its tokens through the prefix cache. One question and three questions are run
in turn (bench/in_turn.py), each on a new context, `--repeats` times after a warm-up; the ratio is the
median of the ratios within a repeat. Beside them (unless --no-separate), the same three questions asked
as three separate one-question calls (each text decoded once per question). Each run also records the
prompt tokens it decoded and those it took from the cache.

The model decides what a question costs beside its text: every label token adds an output row (a product
with the whole output layer), 262,144 rows x 640 for the embedded gemma 3 270M, 151,936 x 896 for the
0.5B instruct model, against a forward pass per prompt token of ~0.1 G (gemma) or ~0.36 G (Qwen)
weights: counted in multiply-adds, a row weighs ~1.7 prompt tokens on the embedded model, ~0.4 on the
instruct one.

    .venv/bin/python bench/bench_questions.py [--model embedded|instruct] [--docs 64] [--repeats 3]
Writes bench/results/questions-<date>-<cpu>.json (embedded) or questions-instruct-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from in_turn import median_of, paired_median, run_in_turn  # noqa: E402
from reuters import reuters_stories  # noqa: E402

QUESTIONS = {"topic": ["acquisition", "crude oil", "earnings"],
             "tone": {"positive": "good news for the companies named", "negative": "bad news for them",
                      "neutral": "neither"},
             "region": ["North America", "Europe", "Middle East", "Asia", "elsewhere"]}
CUT = 1500


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("embedded", "instruct"), default="embedded")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-separate", action="store_true", help="leave out the three separate calls")
    args = ap.parse_args()
    texts = [t[:CUT] for t, _ in reuters_stories()[: args.docs]]
    calls = {"one question": [{"topic": QUESTIONS["topic"]}], "three questions": [QUESTIONS]}
    if not args.no_separate:
        calls["three separate calls"] = [{q: labels} for q, labels in QUESTIONS.items()]
    path = instruct_model_path() if args.model == "instruct" else None
    with newrllama.Model(path) as model:
        def context():  # each run on a new context: nothing cached from the run before
            return newrllama.Context(model, n_ctx=16 * 1024, n_seq_max=16, n_threads=2)

        def timed(codebooks):
            def run(_repeat: int) -> dict:
                decoded = cached = 0
                with context() as ctx:
                    t0 = time.perf_counter()
                    for codebook in codebooks:
                        newrllama.annotate(texts, codebook=codebook, context=ctx)
                        decoded += ctx.last_stats.n_prompt_tokens - ctx.last_stats.n_cached_tokens
                        cached += ctx.last_stats.n_cached_tokens
                    return {"seconds": time.perf_counter() - t0, "prompt_tokens_decoded": decoded,
                            "prompt_tokens_cached": cached}
            return run

        with context() as ctx:
            newrllama.annotate(texts[:16], codebook=QUESTIONS, context=ctx)  # warm-up at full width
        raw = run_in_turn({name: timed(codebooks) for name, codebooks in calls.items()}, args.repeats)
    report = {"model": Path(model.path).name, "model_kind": args.model,
              "docs": len(texts), "cut": CUT, "repeats": args.repeats, "questions": list(QUESTIONS), "raw": raw,
              "runs": {name: {"median_s": median_of(raw, name),
                              "prompt_tokens_decoded": median_of(raw, name, "prompt_tokens_decoded"),
                              "over_one": paired_median(raw, lambda runs, n=name: runs[n]["seconds"]
                                                        / runs["one question"]["seconds"])}
                       for name in calls}}
    for name, r in report["runs"].items():
        print(f"{name:>21}: {r['median_s']:.1f} s for {len(texts)} stories, {r['over_one']:.2f}x one question, "
              f"{r['prompt_tokens_decoded']:.0f} prompt tokens decoded")
    write_results("questions" if args.model == "embedded" else "questions-instruct", report)


if __name__ == "__main__":
    main()
