"""Validity of annotate() on real labelled text: the 70 Reuters stories of r-cran-tm (50 acquisition, 20 crude oil),
cut at 1,500 characters, with the instruct model (scripts/fetch_instruct_model.py).

annotate() starts every cure but "none" from the labels sorted, so the order a user lists them in never
changes its answer. To show how much an arbitrary starting (base) order would still matter under each cure,
the figures are computed from two base orders, A and B, and compared.
1. Two labels. For each prompt variant (no definitions; the issue's instruction, which holds the definitions
   and so puts them in the system turn, before the text; the same definitions given as definitions=, which
   puts them after the text; two coded examples per label as chat turns; the same in the system turn) every
   story is scored under both orders, and each debiasing
   cure is computed from those scores exactly as annotate() computes it (order_bias.py), from base A and
   from base B: accuracy, kappa, macro-F1, the share of stories labelled alike. (A is the sorted order.)
2. Eight labels (the 2 true topics and 6 others), base A as given and B shuffled (not its reverse).
3. Calibration: 20 draws of 20 coded stories; calibrate() on them (every label weighed alike, its default,
   and by the coded sample's shares), applied to the other 50 (median kappa). And 5 draws where the 20 coded
   stories also give the prompt its examples (2 per label, in the system turn, annotate()'s default), the
   other 16 calibrate, and the remaining 50 are scored (annotate() itself).
4. Seconds per 100 stories with annotate() itself, 2 and 8 labels: each cure in turn, each run on a new
   context, twice, after a warm-up; the ratio to "none" is the median of the paired ratios.

    .venv/bin/python bench/bench_validity.py [--draws 20] [--example-draws 5] [--timing-stories 32]
        [--sections two_labels,calibration --keep bench/results/validity-<earlier>.json]
Writes bench/results/validity-<date>-<cpu>.json; bench/report.py prints its tables. With --sections only
those sections run and the others are copied from the --keep file (named in the JSON under "kept").
"""
from __future__ import annotations

import argparse
import json
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
from newrllama.labels.annotate import annotations  # noqa: E402
from newrllama.labels.codebook import check_codebook  # noqa: E402
from newrllama.labels.order_bias import DEBIAS_METHODS, scoring_jobs  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402
from bench_results import write_results  # noqa: E402

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
N_CTX_SEQ = 3072  # room for four example stories before the story
SECTIONS = ("timing", "two_labels", "eight_labels", "calibration", "example_calibration")
EXAMPLE_CALIBRATION = "examples from the coded"


def score(ctx, texts: Sequence[str], book, pairs, examples_in: str = "turns") -> dict:
    """Completions of (text, listing order) pairs, keyed by the pair."""
    pairs = sorted(set(pairs))
    prompts = [book.in_order(order).prompt(ctx.model, texts[i], examples_in) for i, order in pairs]
    done = ctx.generate_parallel(prompts, newrllama.SamplingParams(choices=list(book.labels)))
    failed = [c.error for c in done if c.finish_reason != "stop"]
    if failed:
        raise RuntimeError(f"{len(failed)} prompts failed: {failed[0]}")
    return dict(zip(pairs, done))


def needed(methods, n_texts: int, listings) -> List[Tuple[int, tuple]]:
    return [job for listed in listings for m in methods for job in scoring_jobs(m, list(range(n_texts)), listed)]


def cure(scored, n_texts: int, listed: Tuple[str, ...], method: str):
    """What annotate() would give under ``method`` if its base order were ``listed`` (annotate() itself starts
    from the sorted labels, so the order a user gives never matters; two bases show how much the base order
    would matter), from already scored prompts."""
    jobs = scoring_jobs(method, list(range(n_texts)), listed)
    return annotations(n_texts, listed, method, jobs, [scored[job] for job in jobs], listed), len(jobs) / n_texts


def figures(results, truth) -> Dict[str, float]:
    v = newrllama.validate([a.label for a in results], truth)
    return {"accuracy": v.accuracy, "kappa": v.kappa, "macro_f1": v.macro_f1}


def same_label(a, b) -> float:
    return sum(x.label == y.label for x, y in zip(a, b)) / len(a)


def compare_orders(name, scored, texts, truth, first, second, methods) -> List[dict]:
    rows = []
    for method in methods:
        a, cost = cure(scored, len(texts), first, method)
        b, _ = cure(scored, len(texts), second, method)
        fa, fb = figures(a, truth), figures(b, truth)
        rows.append({"variant": name, "debias": method, "prompts_per_text": cost, "order_a": fa, "order_b": fb,
                     "same_label": same_label(a, b), "kappa_gap": abs(fa["kappa"] - fb["kappa"])})
        print(f"{name:>22} {method:>9} x{cost:.2f}  A: acc {fa['accuracy']:.3f} kappa {fa['kappa']:.3f} "
              f"F1 {fa['macro_f1']:.3f}  B: acc {fb['accuracy']:.3f} kappa {fb['kappa']:.3f} "
              f"F1 {fb['macro_f1']:.3f}  same {rows[-1]['same_label']:.3f}", flush=True)
    return rows


def calibration_draws(scored, texts, truth, draws: int, n_coded: int, method: str, variant: str,
                      balanced: bool) -> dict:
    results, _ = cure(scored, len(texts), LABELS, method)
    kappas, accs, cv, uncal, penalties = [], [], [], [], []
    for d in range(draws):
        coded = set(random.Random(d).sample(range(len(texts)), n_coded))
        rest = [i for i in range(len(texts)) if i not in coded]
        cal = newrllama.calibrate([results[i] for i in sorted(coded)], [truth[i] for i in sorted(coded)],
                                  balanced=balanced)
        penalties.append(cal.penalty)
        v = newrllama.validate([a.label for a in cal.apply([results[i] for i in rest])], [truth[i] for i in rest])
        kappas.append(v.kappa)
        accs.append(v.accuracy)
        cv.append(cal.cv_kappa)
        uncal.append(newrllama.validate([results[i].label for i in rest], [truth[i] for i in rest]).kappa)
    out = {"variant": variant, "debias": method, "balanced": balanced, "draws": draws, "coded": n_coded,
           "examples": 0, "median_kappa": statistics.median(kappas), "median_accuracy": statistics.median(accs),
           "median_cv_kappa": statistics.median(cv), "median_kappa_uncalibrated": statistics.median(uncal),
           "kappas": kappas, "penalties": penalties}
    print(f"calibration ({variant}, {method}, balanced {balanced}, {draws} draws of {n_coded}): median kappa on the rest "
          f"{out['median_kappa']:.3f} (uncalibrated {out['median_kappa_uncalibrated']:.3f}), accuracy "
          f"{out['median_accuracy']:.3f}, cross-validated kappa on the coded {out['median_cv_kappa']:.3f}", flush=True)
    return out


def calibration_with_examples(ctx, texts, truth, draws: int, n_coded: int, method: str) -> dict:
    """Each draw: 2 coded stories per label become the prompt's examples, the other coded ones calibrate."""
    kappas, accs, uncal, cv, penalties = [], [], [], [], []
    for d in range(draws):
        coded = random.Random(d).sample(range(len(texts)), n_coded)
        shots = [i for i in coded if truth[i] == LABELS[0]][:2] + [i for i in coded if truth[i] == LABELS[1]][:2]
        fit = [i for i in coded if i not in shots]
        rest = [i for i in range(len(texts)) if i not in set(coded)]
        done = newrllama.annotate([texts[i] for i in fit + rest], list(LABELS), INSTRUCTION,
                                  examples=[(texts[i], truth[i]) for i in shots], debias=method, context=ctx)
        cal = newrllama.calibrate(done[:len(fit)], [truth[i] for i in fit])
        penalties.append(cal.penalty)
        applied = cal.apply(done[len(fit):])
        v = newrllama.validate([a.label for a in applied], [truth[i] for i in rest])
        kappas.append(v.kappa)
        accs.append(v.accuracy)
        cv.append(cal.cv_kappa)
        uncal.append(newrllama.validate([a.label for a in done[len(fit):]], [truth[i] for i in rest]).kappa)
        print(f"  draw {d}: kappa {v.kappa:.3f} (uncalibrated {uncal[-1]:.3f})", flush=True)
    out = {"variant": EXAMPLE_CALIBRATION, "debias": method, "balanced": True, "draws": draws,
           "coded": n_coded, "examples": 4, "median_kappa": statistics.median(kappas),
           "median_accuracy": statistics.median(accs), "median_cv_kappa": statistics.median(cv),
           "median_kappa_uncalibrated": statistics.median(uncal), "kappas": kappas, "penalties": penalties}
    print(f"calibration with 4 of the {n_coded} coded as examples ({method}, {draws} draws): median kappa "
          f"{out['median_kappa']:.3f} (uncalibrated {out['median_kappa_uncalibrated']:.3f})", flush=True)
    return out


def timing(model, texts, labels, instruction, methods, repeats: int = 2) -> dict:
    """annotate() as a user calls it, each run on a new context (nothing cached from the run before)."""
    def run(method: str, some: Sequence[str]) -> float:
        with newrllama.Context(model, n_ctx=N_SEQ * N_CTX_SEQ, n_seq_max=N_SEQ, n_threads=2) as ctx:
            t0 = time.perf_counter()
            newrllama.annotate(some, list(labels), instruction, debias=method, context=ctx)
            return time.perf_counter() - t0
    run("none", texts[:N_SEQ])  # warm-up
    seconds = {m: [] for m in methods}
    for _ in range(repeats):
        for m in methods:
            seconds[m].append(run(m, texts) * 100 / len(texts))
    out = {m: {"s_per_100": statistics.median(v), "runs": v,
               "over_none": statistics.median(a / b for a, b in zip(v, seconds["none"]))} for m, v in seconds.items()}
    for m, r in out.items():
        print(f"{len(labels)} labels {m:>9}: {r['s_per_100']:.1f} s per 100 stories, {r['over_none']:.2f}x one order",
              flush=True)
    return out


def kept_sections(path: Path, sections: Sequence[str]) -> dict:
    """The parts of an earlier results file that the sections not run now would have written."""
    old = json.loads(path.read_text())
    out = {"kept": {"file": path.name, "sections": [x for x in SECTIONS if x not in sections]}, "calibration": []}
    if "timing" not in sections:
        out["seconds_per_100"], out["seconds_per_100_eight"] = old["seconds_per_100"], old["seconds_per_100_eight"]
    if "two_labels" not in sections:
        out["two_labels"] = old["two_labels"]
    if "eight_labels" not in sections:
        out["eight_labels"] = old["eight_labels"]
    for c in old["calibration"]:
        section = "example_calibration" if c["variant"] == EXAMPLE_CALIBRATION else "calibration"
        if section not in sections:
            out["calibration"].append(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--example-draws", type=int, default=5)
    ap.add_argument("--timing-stories", type=int, default=32)
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    ap.add_argument("--keep", type=Path, help="an earlier results file to take the sections not run from")
    args = ap.parse_args()
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    if not set(sections) <= set(SECTIONS) or ("calibration" in sections and "two_labels" not in sections):
        ap.error(f"--sections: some of {', '.join(SECTIONS)}; calibration needs two_labels")
    if (args.keep is None) != (set(sections) == set(SECTIONS)):
        ap.error("--keep names the file to take the sections not run from, and is needed only then")
    stories = reuters_stories()
    texts = [t[:CUT] for t, _ in stories]
    truth = [label for _, label in stories]
    report = {"model": Path(instruct_model_path()).name, "stories": len(texts), "cut": CUT, "n_seq_max": N_SEQ,
              "calibration": []}
    if args.keep is not None:
        report.update(kept_sections(args.keep, sections))
    methods = [m for m in DEBIAS_METHODS]
    with newrllama.Model(instruct_model_path()) as model, \
            newrllama.Context(model, n_ctx=N_SEQ * N_CTX_SEQ, n_seq_max=N_SEQ, n_threads=2) as ctx:
        if "timing" in sections:
            timed = texts[:args.timing_stories // 2] + texts[-(args.timing_stories // 2):]  # both topics
            report["seconds_per_100"] = timing(model, timed, LABELS, INSTRUCTION, methods)
            report["seconds_per_100_eight"] = timing(model, timed, EIGHT, PLAIN_INSTRUCTION, methods)
        if "two_labels" in sections:
            scored_by, report["scoring_seconds"], report["two_labels"] = two_label_variants(ctx, texts, truth,
                                                                                            methods)
        if "eight_labels" in sections:
            report["eight_labels"] = eight_labels(ctx, texts, truth)
        if "calibration" in sections:
            for name in ("no definitions", "instruction with definitions", "definitions="):
                for method in ("none", "batch", "prior", "reverse"):
                    for balanced in (True, False):
                        report["calibration"].append(calibration_draws(*scored_by[name], args.draws, 20, method,
                                                                       name, balanced))
        if "example_calibration" in sections and args.example_draws:
            report["calibration"].append(calibration_with_examples(ctx, texts, truth, args.example_draws, 20, "reverse"))
    write_results("validity", report)


def two_label_variants(ctx, texts, truth, methods):
    """Every story under both listing orders for each prompt variant: the scores, seconds and rows."""
    reverse = tuple(reversed(LABELS))
    shots = [0, 1, 50, 51]  # the first two stories of each topic, for the examples variants
    examples = [(texts[i], truth[i]) for i in shots]
    variants = {"no definitions": (check_codebook(list(LABELS), PLAIN_INSTRUCTION), "turns", []),
                "instruction with definitions": (check_codebook(list(LABELS), INSTRUCTION), "turns", []),
                "definitions=": (check_codebook(DEFINITIONS, PLAIN_INSTRUCTION), "turns", []),
                "examples as turns": (check_codebook(list(LABELS), INSTRUCTION, None, examples), "turns", shots),
                "examples in system": (check_codebook(list(LABELS), INSTRUCTION, None, examples), "system", shots)}
    scored_by, seconds, rows = {}, {}, []
    for name, (book, where, held) in variants.items():
        keep = [i for i in range(len(texts)) if i not in held]
        sub_texts, sub_truth = [texts[i] for i in keep], [truth[i] for i in keep]
        t0 = time.perf_counter()
        scored = score(ctx, sub_texts, book, needed(methods, len(sub_texts), [LABELS, reverse]), where)
        seconds[name] = {"prompts": len(scored), "seconds": time.perf_counter() - t0}
        print(f"{name}: {len(scored)} prompts in {seconds[name]['seconds']:.1f} s", flush=True)
        scored_by[name] = (scored, sub_texts, sub_truth)
        rows += compare_orders(name, scored, sub_texts, sub_truth, LABELS, reverse, methods)
    return scored_by, seconds, rows


def eight_labels(ctx, texts, truth) -> dict:
    shuffled = tuple(random.Random(1).sample(EIGHT, len(EIGHT)))
    eight = check_codebook(list(EIGHT), PLAIN_INSTRUCTION)
    eight_methods = ["none", "batch", "prior", "reverse", "rotations"]
    t0 = time.perf_counter()
    scored8 = score(ctx, texts, eight, needed(eight_methods, len(texts), [EIGHT, shuffled]))
    print(f"eight labels: {len(scored8)} prompts in {time.perf_counter() - t0:.1f} s", flush=True)
    return {"orders": [list(EIGHT), list(shuffled)],
            "rows": compare_orders("eight labels", scored8, texts, truth, EIGHT, shuffled, eight_methods)}


if __name__ == "__main__":
    main()
