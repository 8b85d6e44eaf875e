"""Shares with valid intervals on real coded text: how often each interval covers the share of "crude oil" among
the 70 Reuters stories of r-cran-tm (20 of 70, from every human code), over many random coded samples of 40.

The instruct model labels every story (annotate(), default order cure) under two prompts: the instruction with
the definitions in it (where the model labels nearly every story "acquisition") and the definitions given as
definitions= (bench/bench_validity.py has their agreement). For each of --draws random samples of 40 stories
taken as coded (the others' codes hidden), newrllama.prevalence() gives the PPI++ interval from the
probabilities and from the labels, the coded stories' own interval and the naive share of the model's labels;
reported: each one's coverage of the true share at 95% nominal, its median width, and the median lambda.
Then two-phase samples of the same size: a random 20 coded first, then 20 more drawn by plan_coding() for that
budget, uniformly or actively (favouring the stories whose labels the model is least sure of, each coded
story weighted by its probability of being drawn): the PPI intervals' coverage and median width of each.
Last, a model-coded regressor: the coefficient of "crude oil" in a least-squares regression of the story's log
word count (known for every story) on it, computed from every human code; newrllama.regression() with the
label's probability as predicted_regressors on the same samples of 40, against the coded stories alone and the
naive fit on the model's probabilities for every story.

    .venv/bin/python bench/bench_findings.py [--draws 2000] [--coded 40]
Writes bench/results/findings-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402

import newrllama  # noqa: E402
from newrllama.findings.ppi import classical_glm  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_validity import DEFINITIONS, INSTRUCTION, PLAIN_INSTRUCTION  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402

LABEL = "crude oil"
LABELS = ["acquisition", "crude oil"]
CUT = 1500


def annotations(model, texts):
    out = {}
    with newrllama.Context(model, n_ctx=16 * 3072, n_seq_max=16, n_threads=2) as ctx:
        for name, (instruction, definitions) in {"instruction with definitions": (INSTRUCTION, None),
                                                 "definitions=": (PLAIN_INSTRUCTION, DEFINITIONS)}.items():
            t0 = time.perf_counter()
            out[name] = newrllama.annotate(texts, LABELS, instruction, definitions=definitions, context=ctx)
            print(f"{name}: annotated in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def coverage(done, truth, draws: int, n_coded: int, seed: int) -> dict:
    true_share = truth.count(LABEL) / len(truth)
    rng = random.Random(seed)
    kinds = ("ppi, probabilities", "ppi, labels", "coded only", "naive")
    hits = dict.fromkeys(kinds, 0)
    widths = {k: [] for k in kinds}
    lams = []
    for _ in range(draws):
        coded = set(rng.sample(range(len(truth)), n_coded))
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        by_probs = newrllama.prevalence(done, codes).share(LABEL)
        by_labels = newrllama.prevalence(done, codes, predictions="labels").share(LABEL)
        intervals = {"ppi, probabilities": (by_probs.lower, by_probs.upper),
                     "ppi, labels": (by_labels.lower, by_labels.upper),
                     "coded only": (by_probs.classical_lower, by_probs.classical_upper),
                     "naive": (by_probs.naive_lower, by_probs.naive_upper)}
        for k, (lo, hi) in intervals.items():
            hits[k] += lo <= true_share <= hi
            widths[k].append(hi - lo)
        lams.append(by_probs.lam)
    # A uniform draw is also weighted by its (equal) probabilities, so that the active draw's gain is not the
    # design-based interval's alone (it is about these 70 stories, and a coded story is no longer uncertain).
    two_phase = {}
    for name in ("uniform", "uniform, design-based", "active"):
        covered, phase_widths = 0, []
        for d in range(draws):
            first = set(rng.sample(range(len(truth)), n_coded // 2))
            codes = [t if i in first else None for i, t in enumerate(truth)]
            plan = newrllama.plan_coding(done, codes, budget=n_coded - n_coded // 2, seed=d, active=name == "active")
            chosen = first | set(plan.texts)
            probs = plan.inclusion_probs or ([n_coded / len(truth)] * len(truth) if "design" in name else None)
            share = newrllama.prevalence(done, [t if i in chosen else None for i, t in enumerate(truth)],
                                         inclusion_probs=probs).share(LABEL)
            covered += share.lower <= true_share <= share.upper
            phase_widths.append(share.upper - share.lower)
        two_phase[name] = {"coverage": covered / draws, "median_width": statistics.median(phase_widths)}
    labels = [a.label for a in done]
    return {"true_share": true_share, "two_phase": two_phase, "naive_share": labels.count(LABEL) / len(labels),
            "kappa": newrllama.validate(labels, truth).kappa,
            "coverage": {k: hits[k] / draws for k in kinds},
            "median_width": {k: statistics.median(widths[k]) for k in kinds},
            "median_lambda_probabilities": statistics.median(lams)}


def regression_coverage(done, truth, lengths, draws: int, n_coded: int, seed: int) -> dict:
    is_label = [float(t == LABEL) for t in truth]
    probs = [a.probs[LABEL] for a in done]
    target = classical_glm("gaussian", np.column_stack([np.ones(len(truth)), is_label]), np.array(lengths), 0.05)[1]
    # The naive fit: the model's probabilities taken for the codes, on every story.
    naive = classical_glm("gaussian", np.column_stack([np.ones(len(truth)), probs]), np.array(lengths), 0.05)[1]
    rng = random.Random(seed)
    kinds = ("ppi", "coded only")
    hits, widths = dict.fromkeys(kinds, 0), {k: [] for k in kinds}
    for _ in range(draws):
        coded = set(rng.sample(range(len(truth)), n_coded))
        x = [[v if i in coded else None] for i, v in enumerate(is_label)]
        c = newrllama.regression(x, lengths, predicted_regressors={LABEL: probs}, names=[LABEL]).coefficient(LABEL)
        for k, (lo, hi) in {"ppi": (c.lower, c.upper), "coded only": (c.classical_lower, c.classical_upper)}.items():
            hits[k] += lo <= target.estimate <= hi
            widths[k].append(hi - lo)
    return {"outcome": "log word count", "regressor": LABEL, "true_coefficient": target.estimate,
            "naive": {"estimate": naive.estimate, "lower": naive.lower, "upper": naive.upper,
                      "covers": naive.lower <= target.estimate <= naive.upper},
            "coverage": {k: hits[k] / draws for k in kinds},
            "median_width": {k: statistics.median(widths[k]) for k in kinds}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--coded", type=int, default=40)
    ap.add_argument("--seed", type=int, default=46)
    args = ap.parse_args()
    stories = reuters_stories()
    texts, truth = [t[:CUT] for t, _ in stories], [label for _, label in stories]
    lengths = [math.log(len(t.split())) for t, _ in stories]
    with newrllama.Model(instruct_model_path()) as model:
        done = annotations(model, texts)
    report = {"model": Path(instruct_model_path()).name, "stories": len(texts), "cut": CUT, "coded": args.coded,
              "draws": args.draws, "seed": args.seed, "label": LABEL,
              "prompts": {name: coverage(d, truth, args.draws, args.coded, args.seed) for name, d in done.items()},
              "regressor": {name: regression_coverage(d, truth, lengths, args.draws, args.coded, args.seed)
                            for name, d in done.items()}}
    write_results("findings", report)
    for name, r in report["prompts"].items():
        print(name, {k: round(v, 3) for k, v in r["coverage"].items()}, {k: round(v, 3) for k, v in r["median_width"].items()},
              f"kappa {r['kappa']:.3f} naive {r['naive_share']:.3f} true {r['true_share']:.3f}", r["two_phase"])
    for name, r in report["regressor"].items():
        print(name, "regressor:", r)


if __name__ == "__main__":
    main()
