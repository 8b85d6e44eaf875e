"""Validity of annotate() on real labelled text: the 70 Reuters stories of r-cran-tm (50 acquisition, 20 crude oil),
cut at 1,500 characters, with the instruct model (scripts/fetch_instruct_model.py).

For each prompt variant (zero-shot; definitions per label; two coded examples per label as chat turns; the
same in the system turn) every story is scored once under each rotation of the label list, and each
debiasing cure ("none", "batch", "prior", "rotations") is computed from those scores exactly as annotate()
computes it, for both listing orders: accuracy, kappa, macro-F1, the share of stories whose label is the
same under both orders, and the prompts each cure needs per story. Seconds per 100 stories are measured
for one order ("none") and for "prior" with annotate() itself. Then calibration: 20 draws of 20 coded
stories, calibrate() on them, applied to the other 50 (median kappa). Then 8 labels (the 2 true topics
and 6 others): the two listing orders (given and reversed) with "none" and "prior".

    .venv/bin/python bench/bench_validity.py [--stories 70] [--draws 20]
Writes bench/results/validity-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

import newrllama  # noqa: E402
from newrllama.annotate import annotations  # noqa: E402
from newrllama.codebook import check_codebook, rotations  # noqa: E402
from newrllama.order_bias import DEBIAS_METHODS, scoring_jobs  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402

INSTRUCTION = ("You are coding Reuters news stories for a content analysis. Decide the topic of the story. "
               "'acquisition': mainly about a company buying, merging with or taking a stake in another company. "
               "'crude oil': mainly about oil prices, oil production or the oil industry.")
PLAIN_INSTRUCTION = "You are coding Reuters news stories for a content analysis. Decide the topic of the story."
DEFINITIONS = {"acquisition": "mainly about a company buying, merging with or taking a stake in another company.",
               "crude oil": "mainly about oil prices, oil production or the oil industry."}
LABELS = ("acquisition", "crude oil")
EIGHT = ("acquisition", "crude oil", "earnings", "interest rates", "trade", "grain", "currency", "shipping")
CUT = 1500
N_SEQ = 16


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def score_all_rotations(ctx, texts: Sequence[str], book, examples_in: str = "turns"):
    """Completions of every (text, rotation) prompt, keyed by (text index, the rotated label tuple)."""
    orders = rotations(book.labels)
    jobs = [(i, r) for r in range(len(orders)) for i in range(len(texts))]
    prompts = [book.in_order(orders[r]).prompt(ctx.model, texts[i], examples_in) for i, r in jobs]
    t0 = time.perf_counter()
    done = ctx.generate_parallel(prompts, newrllama.SamplingParams(choices=list(book.labels)))
    seconds = time.perf_counter() - t0
    return {(i, orders[r]): c for (i, r), c in zip(jobs, done)}, seconds, len(prompts)


def cure(scored, n_texts: int, listed: Tuple[str, ...], method: str):
    """annotate()'s result for labels listed in ``listed`` under ``method``, from already scored prompts."""
    jobs = scoring_jobs(method, list(range(n_texts)), len(listed))
    orders = rotations(listed)
    return annotations(n_texts, listed, method, jobs, [scored[(i, orders[r])] for i, r in jobs]), len(jobs) / n_texts


def figures(results, truth) -> Dict[str, float]:
    v = newrllama.validate([a.label for a in results], truth)
    return {"accuracy": v.accuracy, "kappa": v.kappa, "macro_f1": v.macro_f1}


def same_label(a, b) -> float:
    return sum(x.label == y.label for x, y in zip(a, b)) / len(a)


def variant_rows(name, scored, texts, truth, labels) -> List[dict]:
    rows = []
    reverse = tuple(reversed(labels))
    for method in DEBIAS_METHODS:
        first, cost = cure(scored, len(texts), labels, method)
        second, _ = cure(scored, len(texts), reverse, method)
        f1, f2 = figures(first, truth), figures(second, truth)
        rows.append({"variant": name, "debias": method, "prompts_per_text": cost, "order_a": f1, "order_b": f2,
                     "same_label": same_label(first, second)})
        print(f"{name:>22} {method:>9} x{cost:.2f}  A: acc {f1['accuracy']:.3f} kappa {f1['kappa']:.3f} "
              f"F1 {f1['macro_f1']:.3f}  B: acc {f2['accuracy']:.3f} kappa {f2['kappa']:.3f} "
              f"F1 {f2['macro_f1']:.3f}  same {rows[-1]['same_label']:.3f}", flush=True)
    return rows


def calibration_draws(scored, texts, truth, draws: int, n_coded: int, method: str) -> dict:
    results, _ = cure(scored, len(texts), LABELS, method)
    kappas, accs, cv, uncal = [], [], [], []
    for d in range(draws):
        coded = set(random.Random(d).sample(range(len(texts)), min(n_coded, len(texts) - 1)))
        rest = [i for i in range(len(texts)) if i not in coded]
        cal = newrllama.calibrate([results[i] for i in sorted(coded)], [truth[i] for i in sorted(coded)])
        applied = cal.apply([results[i] for i in rest])
        v = newrllama.validate([a.label for a in applied], [truth[i] for i in rest])
        kappas.append(v.kappa)
        accs.append(v.accuracy)
        cv.append(cal.cv_kappa)
        uncal.append(newrllama.validate([results[i].label for i in rest], [truth[i] for i in rest]).kappa)
    out = {"debias": method, "draws": draws, "coded": n_coded, "median_kappa": statistics.median(kappas),
           "median_accuracy": statistics.median(accs), "median_cv_kappa": statistics.median(cv),
           "median_kappa_uncalibrated": statistics.median(uncal), "kappas": kappas}
    print(f"calibration ({method}, {draws} draws of {n_coded}): median kappa on the rest {out['median_kappa']:.3f} "
          f"(uncalibrated {out['median_kappa_uncalibrated']:.3f}), accuracy {out['median_accuracy']:.3f}, "
          f"cross-validated kappa on the coded {out['median_cv_kappa']:.3f}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stories", type=int, default=70)
    ap.add_argument("--draws", type=int, default=20)
    args = ap.parse_args()
    stories = reuters_stories()[: args.stories]
    texts = [t[:CUT] for t, _ in stories]
    truth = [label for _, label in stories]
    report = {"machine": {"cpu": cpu_name(), "python": platform.python_version()}, "model": Path(instruct_model_path()).name,
              "stories": len(texts), "cut": CUT, "n_seq_max": N_SEQ, "rows": []}
    with newrllama.Model(instruct_model_path()) as model, \
            newrllama.Context(model, n_ctx=N_SEQ * 1024, n_seq_max=N_SEQ, n_threads=2) as ctx:
        # Timing with annotate() itself: one order, then "prior" (alternated, after a warm-up).
        newrllama.annotate(texts[:N_SEQ], LABELS, INSTRUCTION, debias="none", context=ctx)
        timing = {"none": [], "prior": []}
        for _ in range(2):
            for method in timing:
                t0 = time.perf_counter()
                newrllama.annotate(texts, LABELS, INSTRUCTION, debias=method, context=ctx)
                timing[method].append((time.perf_counter() - t0) * 100 / len(texts))
        report["seconds_per_100"] = timing
        print(f"seconds per 100 stories: none {timing['none']}, prior {timing['prior']}", flush=True)

        variants = {"zero-shot": (check_codebook(list(LABELS), INSTRUCTION), "turns", None),
                    "definitions": (check_codebook(DEFINITIONS, PLAIN_INSTRUCTION), "turns", None)}
        # Two coded examples per label (the first two stories of each topic), scored on the other 66.
        shots = [0, 1, 50, 51] if len(texts) == 70 else []
        if shots:
            examples = [(texts[i], truth[i]) for i in shots]
            variants["examples as turns"] = (check_codebook(list(LABELS), INSTRUCTION, None, examples), "turns", shots)
            variants["examples in system"] = (check_codebook(list(LABELS), INSTRUCTION, None, examples), "system", shots)
        scored_by = {}
        for name, (book, where, held) in variants.items():
            keep = [i for i in range(len(texts)) if not held or i not in held]
            sub_texts, sub_truth = [texts[i] for i in keep], [truth[i] for i in keep]
            scored, seconds, n = score_all_rotations(ctx, sub_texts, book, where)
            print(f"{name}: {n} prompts in {seconds:.1f} s", flush=True)
            scored_by[name] = (scored, sub_texts, sub_truth)
            report["rows"] += variant_rows(name, scored, sub_texts, sub_truth, LABELS)
        report["calibration"] = [calibration_draws(*scored_by[name][:3], args.draws, 20, method)
                                 for name in ("zero-shot", "definitions") for method in ("none", "prior")]
        for c, name in zip(report["calibration"], ["zero-shot", "zero-shot", "definitions", "definitions"]):
            c["variant"] = name

        eight = check_codebook(list(EIGHT), PLAIN_INSTRUCTION)
        rows8 = []
        for listed in (EIGHT, tuple(reversed(EIGHT))):
            book = eight.in_order(listed)
            jobs = scoring_jobs("prior", list(range(len(texts))), len(listed))
            orders = rotations(listed)
            prompts = [book.in_order(orders[r]).prompt(model, texts[i]) for i, r in jobs]
            t0 = time.perf_counter()
            done = ctx.generate_parallel(prompts, newrllama.SamplingParams(choices=list(EIGHT)))
            seconds = time.perf_counter() - t0
            first = [jobs.index((i, 0)) for i in range(len(texts))]
            none = annotations(len(texts), listed, "none", [jobs[k] for k in first], [done[k] for k in first])
            prior = annotations(len(texts), listed, "prior", jobs, done)
            rows8.append({"listed": list(listed), "seconds": seconds, "prompts": len(prompts),
                          "none": figures(none, truth), "prior": figures(prior, truth),
                          "labels_none": [a.label for a in none], "labels_prior": [a.label for a in prior]})
        eight_out = {"rows": rows8}
        for method in ("none", "prior"):
            a, b = rows8[0][f"labels_{method}"], rows8[1][f"labels_{method}"]
            eight_out[f"same_label_{method}"] = sum(x == y for x, y in zip(a, b)) / len(a)
            print(f"8 labels, {method}: A {rows8[0][method]} B {rows8[1][method]} same {eight_out[f'same_label_{method}']:.3f}",
                  flush=True)
        report["eight_labels"] = eight_out
    day = datetime.date.today().isoformat()
    cpu = "".join(ch if ch.isalnum() else "-" for ch in cpu_name()).strip("-")[:40]
    out = ROOT / "bench" / "results" / f"validity-{day}-{cpu}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
