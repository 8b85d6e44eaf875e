"""Markdown tables from committed benchmark results (bench/results/<name>-<date>-<cpu>.json), for the README.

    .venv/bin/python bench/report.py bench/results/validity-2026-11-24-AMD-EPYC.json [more files]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Dict, List


def _f(x: float) -> str:
    return f"{x:.3f}"


def validity(r: dict) -> List[str]:
    out = [f"Instruct model `{r['model']}`, {r['stories']} Reuters stories cut at {r['cut']} characters, "
           f"{r['machine']['cpu']}.", "",
           "Two labels, base order \"acquisition, crude oil\" (A, the sorted order annotate() uses) and \"crude oil, "
           "acquisition\" (B); examples variants are scored on the 66 stories that are not examples.", "",
           "| prompt | debias | prompts per text | A: accuracy | A: kappa | A: macro-F1 | B: accuracy | B: kappa "
           "| B: macro-F1 | same label A/B |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in r["two_labels"]:
        a, b = row["order_a"], row["order_b"]
        out.append(f"| {row['variant']} | {row['debias']} | {row['prompts_per_text']:.2f} | {_f(a['accuracy'])} | "
                   f"{_f(a['kappa'])} | {_f(a['macro_f1'])} | {_f(b['accuracy'])} | {_f(b['kappa'])} | "
                   f"{_f(b['macro_f1'])} | {_f(row['same_label'])} |")
    eight = r["eight_labels"]
    out += ["", f"Eight labels, base order {', '.join(eight['orders'][0])} (A) and {', '.join(eight['orders'][1])} (B):", "",
            "| debias | prompts per text | A: accuracy | A: kappa | B: accuracy | B: kappa | same label A/B |",
            "|---|---|---|---|---|---|---|"]
    for row in eight["rows"]:
        a, b = row["order_a"], row["order_b"]
        out.append(f"| {row['debias']} | {row['prompts_per_text']:.2f} | {_f(a['accuracy'])} | {_f(a['kappa'])} | "
                   f"{_f(b['accuracy'])} | {_f(b['kappa'])} | {_f(row['same_label'])} |")
    out += ["", "Calibration on 20 coded stories drawn at random, applied to the other 50 (medians over the draws; "
            "weights: every label alike, calibrate()'s default, or the coded sample's shares):", "",
            "| prompt | debias | weights | draws | kappa uncalibrated | kappa calibrated | lowest kappa calibrated "
            "| accuracy calibrated | cross-validated kappa on the 20 |", "|---|---|---|---|---|---|---|---|---|"]
    for c in r["calibration"]:
        weights = "labels alike" if c.get("balanced", True) else "sample shares"
        out.append(f"| {c['variant']} | {c['debias']} | {weights} | {c['draws']} | "
                   f"{_f(c['median_kappa_uncalibrated'])} | {_f(c['median_kappa'])} | {_f(min(c['kappas']))} | "
                   f"{_f(c['median_accuracy'])} | {_f(c['median_cv_kappa'])} |")
    out += ["", "Seconds per 100 stories with `annotate()` (median of the runs; ratio: median of the paired ratios):",
            "", "| debias | 2 labels: s / 100 stories | ratio to one order | 8 labels: s / 100 stories "
            "| ratio to one order |", "|---|---|---|---|---|"]
    eight = r["seconds_per_100_eight"]
    for method, t in r["seconds_per_100"].items():
        out.append(f"| {method} | {t['s_per_100']:.1f} | {t['over_none']:.2f} | {eight[method]['s_per_100']:.1f} | "
                   f"{eight[method]['over_none']:.2f} |")
    return out


def table(intro: str, header: List[str], rows: List[List[str]]) -> List[str]:
    """An introducing line, then a markdown table."""
    return [intro, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows]


def questions(r: dict) -> List[str]:
    return table(f"{r['docs']} Reuters stories, embedded model, {r['machine']['cpu']}, median of {r['repeats']} runs in "
                 "turn:", ["run", "seconds", "ratio to one question"],
                 [[name, f"{run['median_s']:.1f}", f"{run['over_one']:.2f}"] for name, run in r["runs"].items()])


def vs_llama_server(r: dict) -> List[str]:
    rows = []
    for name, w in r["workloads"].items():
        for engine, rate in w["rates"].items():
            ratio = w["ratios"].get(engine)
            rows.append([name, f"`{engine}`", f"{rate:.2f} {w['unit']}", f"{ratio:.2f}" if ratio else "1"])
    return table(
        f"{r['docs']} prompts per workload, {r['clients']} concurrent clients, {r['n_seq']} sequences (slots) of "
        f"{r['n_ctx'] // r['n_seq']} cells, {r['threads']} threads, embedded model, {r['machine']['cpu']}; medians over "
        f"{r['repeats']} repeats (ratio to llama-server: median of the ratios within a repeat):",
        ["workload", "engine", "rate", "ratio"], rows) + [""] + table(
        "In process, beside the servers:", ["comparison", "ratio"],
        [[name, f"{value:.2f}"] for name, value in r["in_process"].items()])


def two_contexts(r: dict) -> List[str]:
    return table(f"{r['n_seq']} prompts x {r['max_tokens']} greedy tokens on context A, {r['threads']} threads, embedded "
                 f"model, {r['machine']['cpu']}; medians of {r['repeats']} runs, cases in rotating order:",
                 ["case", "tokens/s", "ratio to alone"],
                 [[name, f"{case['median_tokens_per_s']:.1f}", f"{case['over_alone']:.2f}"]
                  for name, case in r["cases"].items()])


def cluster_shared_instruction(r: dict) -> List[str]:
    return table(f"{r['docs']} prompts under one {r['instruction_tokens']}-token instruction, 4 greedy tokens each, "
                 f"{r['machine']['cpu']}; the cluster has 1 worker and sends {r['chunks']} chunks of {r['n_seq_max']}:",
                 ["run", "seconds", "prompt tokens decoded", "instruction decoded (times)"],
                 [[name.replace("_", " "), f"{r[name]['seconds']:.2f}", str(r[name]["prompt_tokens_decoded"]),
                   f"{r[name]['instruction_decodes']:.2f}"] for name in ("local_one_call", "cluster_1_worker")])


def long_prompts(r: dict) -> List[str]:
    return table(f"{r['n_seq']} distinct prompts, prefill and one token, {r['threads']} threads, embedded model, "
                 f"{r['machine']['cpu']}; prompt tokens/s (median of {r['repeats']}) and the speed ratio to "
                 "llama-batched-bench with a KV stream per sequence (median of the ratios within a repeat):",
                 ["prompt tokens", "run", "tokens/s", "ratio"],
                 [[n, name, f"{run['prompt_tokens_per_s']:.1f}", f"{run['over_streams']:.2f}"]
                  for n, runs in r["summary"].items() for name, run in runs.items()])


REPORTS: Dict[str, Callable[[dict], List[str]]] = {
    "validity": validity, "questions": questions, "vs-llama-server": vs_llama_server, "two-contexts": two_contexts,
    "cluster-shared-instruction": cluster_shared_instruction, "long-prompts": long_prompts}


def main(paths: List[str]) -> int:
    for path in paths:
        kind = next((k for k in REPORTS if Path(path).name.startswith(k + "-")), None)
        if kind is None:
            print(f"no report for {path} (known: {', '.join(REPORTS)})", file=sys.stderr)
            return 1
        print(f"<!-- from {Path(path).as_posix()} by bench/report.py -->")
        print("\n".join(REPORTS[kind](json.loads(Path(path).read_text()))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
