"""Markdown from committed benchmark results (bench/results/<name>-<date>-<cpu>[-<rerun>].json): the only
source of the figures in the documentation.

    .venv/bin/python bench/report.py bench/results/validity-2026-11-24-AMD-EPYC.json [more files]
    .venv/bin/python bench/report.py --page > docs/benchmarks.md      # every file, with its commit and command
    .venv/bin/python bench/report.py --headline                        # the README's table of headline figures

tests/python/docs/test_figures_match_results.py checks that docs/benchmarks.md and the README's table equal
this script's output.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple


def _f(x: float) -> str:
    return f"{x:.3f}"


# The weights of the model files the benchmarks run: the files are all named Q4_K_M, but the two small models'
# widths do not tile K-quants, so most of their weights are Q5_0.
WEIGHTS = {
    "gemma-3-270m-q4_k_m.gguf": "gemma-3-270m, embedded (81 Q5_0, 10 Q8_0, 27 Q4_K, 9 Q6_K tensors)",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": "Qwen2.5-Coder-0.5B-Instruct (weights mostly Q5_0)",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (169 Q4_K, 29 Q6_K tensors)",
}


EMBEDDED = "gemma-3-270m-q4_k_m.gguf"
SMALL_INSTRUCT = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # scripts/fetch_instruct_model.py's default
K_QUANT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def model_of(r: dict) -> str:
    """The model a results file ran, with its weights where the file is a known one (files from before the
    machine record named a model ran the embedded one)."""
    name = r["machine"].get("model", EMBEDDED)
    return WEIGHTS.get(name, name)


def instruct_model_of(r: dict) -> str:
    """The instruct model of bench_determinism's annotate() cases (the 0.5B one before files recorded it)."""
    name = r.get("instruct", SMALL_INSTRUCT)
    return WEIGHTS.get(name, name)


def validity(r: dict) -> List[str]:
    out = [f"Instruct model `{r['model']}`, {r['stories']} Reuters stories cut at {r['cut']} characters, "
           f"{cpu_of(r)}.", "",
           "Two labels, base order \"acquisition, crude oil\" (A, the sorted order annotate() uses) and \"crude oil, "
           "acquisition\" (B); examples variants are scored on the 66 stories that are not examples.", ""]
    if "kept" in r:
        out += [f"Sections {', '.join(r['kept']['sections'])}: copied from `{r['kept']['file']}` (their prompts did not "
                "change).", ""]
    if "scoring_seconds" in r:
        out += ["Seconds to score every story in both orders, one call per variant: " + "; ".join(
            f"{name} {t['seconds']:.0f} ({t['prompts']} prompts)" for name, t in r["scoring_seconds"].items()) + ".", ""]
    out += ["| prompt | debias | prompts per text | A: accuracy | A: kappa | A: macro-F1 | B: accuracy | B: kappa "
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
    model = f"`{r['model']}`" if "model" in r else "embedded model"
    decoded = all("prompt_tokens_decoded" in run for run in r["runs"].values())
    return table(f"{r['docs']} Reuters stories, {model}, {cpu_of(r)}, median of {r['repeats']} runs in "
                 "turn:", ["run", "seconds", "ratio to one question"] + (["prompt tokens decoded"] if decoded else []),
                 [[name, f"{run['median_s']:.1f}", f"{run['over_one']:.2f}"]
                  + ([f"{run['prompt_tokens_decoded']:.0f}"] if decoded else []) for name, run in r["runs"].items()])


def question_layout(r: dict) -> List[str]:
    return table(f"Instruct model `{r['model']}`, {r['stories']} Reuters stories cut at {r['cut']} characters, "
                 f"instruction \"{r['instruction']}\", debias \"reverse\", {cpu_of(r)}:",
                 ["annotate()", "accuracy [95% CI]", "kappa [95% CI]", "labels given", "seconds"],
                 [[name, f"{_f(run['accuracy'])} [{run['accuracy_ci'][0]:.2f}, {run['accuracy_ci'][1]:.2f}]",
                   f"{_f(run['kappa'])} [{run['kappa_ci'][0]:.2f}, {run['kappa_ci'][1]:.2f}]",
                   ", ".join(f"{label} {n}" for label, n in sorted(run["labels"].items())), f"{run['seconds']:.0f}"]
                  for name, run in r["runs"].items()])


def vs_llama_server(r: dict) -> List[str]:
    rows = []
    for name, w in r["workloads"].items():
        for engine, rate in w["rates"].items():
            ratio = w["ratios"].get(engine)
            rows.append([name, f"`{engine}`", f"{rate:.2f} {w['unit']}", f"{ratio:.2f}" if ratio else "1"])
    return table(
        f"{r['docs']} prompts per workload, {r['clients']} concurrent clients, {r['n_seq']} sequences (slots) of "
        f"{r['n_ctx'] // r['n_seq']} cells, {r['threads']} threads, {model_of(r)}, {cpu_of(r)}; medians over "
        f"{r['repeats']} repeats (ratio to llama-server: median of the ratios within a repeat):",
        ["workload", "engine", "rate", "ratio"], rows) + [""] + table(
        "In process, beside the servers:", ["comparison", "ratio"],
        [[name, f"{value:.2f}"] for name, value in r["in_process"].items()]) + ([""] + table(
            "`newrllama serve` against `llama-server --swa-full` (median of the ratios within a repeat):",
            ["workload", "ratio"], [[name, f"{value:.2f}"] for name, value in r["against_swa_full"].items()])
            if r.get("against_swa_full") else [])


def two_contexts(r: dict) -> List[str]:
    return table(f"{r['n_seq']} prompts x {r['max_tokens']} greedy tokens on context A, {r['threads']} threads, embedded "
                 f"model, {cpu_of(r)}; medians of {r['repeats']} runs, cases in rotating order:",
                 ["case", "tokens/s", "ratio to alone"],
                 [[name, f"{case['median_tokens_per_s']:.1f}", f"{case['over_alone']:.2f}"]
                  for name, case in r["cases"].items()])


def openmp_neighbours(r: dict) -> List[str]:
    return table(f"One prompt x {r['max_tokens']} greedy tokens, {r['n_threads']} threads, {model_of(r)}, {cpu_of(r)}, "
                 f"llama.cpp's CPU library `{r['cpu_library_sha256']}`; each case in a fresh process whose main thread "
                 f"ran the neighbour once, medians of {r['repeats']} rounds of {r['runs']} calls, cases in rotating "
                 "order:", ["case", "tokens/s", "ratio to alone"],
                 [[name, f"{case['tokens_per_s']:.1f}", f"{case['over_alone']:.2f}"] for name, case in r["summary"].items()])


def determinism(r: dict) -> List[str]:
    names = list(r["raw"][0]["runs"])

    def count(n: str, case: str) -> str:  # summed over the repeats
        pairs = [repeat["runs"][n]["cases"][case] for repeat in r["raw"]]
        return f"{sum(p[0] for p in pairs)} of {sum(p[1] for p in pairs)}"
    cases = [c for c in r["raw"][0]["runs"][names[0]]["cases"] if not c.endswith("gap")]
    rows = [[case] + [count(n, case) for n in names] for case in cases]
    gap = "annotate: largest probability gap"
    rows.append([gap] + [f"{max(repeat['runs'][n]['cases'][gap] for repeat in r['raw']):.4f}" for n in names])
    lines = table(f"Identical answers (texts and token ids; annotate: labels and probabilities, bit for bit) over "
                  f"{len(r['raw'])} repeats, {model_of(r)} (annotate: {instruct_model_of(r)}), {cpu_of(r)}, commit "
                  f"{r['machine']['commit'][:10]}:",
                  ["case"] + names, rows)
    if not r["time_against_default"]:  # the default variant alone: nothing to time it against
        return lines
    lines.append("")
    work = (f"generation, {r.get('prompts', 32)} prompts", f"annotate, {r.get('texts', 70)} texts")
    return lines + table("Time against the default (median of the ratios within a repeat, "
                         f"{len(r['raw'])} repeats in turn):", ["variant", *work],
                         [[n] + [f"{t[f'{w} seconds']:.2f}" for w in work] for n, t in r["time_against_default"].items()])


def cluster_shared_instruction(r: dict) -> List[str]:
    repeats = f"; seconds: medians of {r['repeats']} repeats in turn after a full-width warm-up each" \
        if "repeats" in r else ""
    return table(f"{r['docs']} prompts under one {r['instruction_tokens']}-token instruction, 4 greedy tokens each, "
                 f"{cpu_of(r)}; the cluster has 1 worker and sends {r['chunks']} chunks of {r['n_seq_max']}"
                 f"{repeats}:",
                 ["run", "seconds", "prompt tokens decoded", "instruction decoded (times)"],
                 [[name.replace("_", " "), f"{r[name]['seconds']:.2f}", str(r[name]["prompt_tokens_decoded"]),
                   f"{r[name]['instruction_decodes']:.2f}"] for name in ("local_one_call", "cluster_1_worker")])


def long_prompts(r: dict) -> List[str]:
    return table(f"{r['n_seq']} distinct prompts, prefill and one token, {r['threads']} threads, embedded model, "
                 f"{cpu_of(r)}; prompt tokens/s (median of {r['repeats']}) and the speed ratio to "
                 "llama-batched-bench with a KV stream per sequence (median of the ratios within a repeat):",
                 ["prompt tokens", "run", "tokens/s", "ratio"],
                 [[n, name, f"{run['prompt_tokens_per_s']:.1f}", f"{run['over_streams']:.2f}"]
                  for n, runs in r["summary"].items() for name, run in runs.items()])


def _ratio(ratios: dict, name: str) -> str:
    return f"{ratios[name]:.3f}" if name in ratios else "-"


def parallel(r: dict) -> List[str]:
    sizes = [size["summary"] for size in r["sizes"].values()]
    engines, pairs = list(sizes[0]["tokens_per_s"]), list(sizes[0]["ratios"])
    out = table(f"{r['prompt_tokens']}-token prompts, {r['max_tokens']} greedy tokens each (llama-batched-bench: "
                f"`-ntg {r['batched_bench_ntg']}`, the same decode steps), {r['n_threads']} threads, {model_of(r)}, "
                f"{cpu_of(r)}; generated tokens/s with prefill, medians of {r['repeats']} repeats, engines in "
                "turn after a full-width warm-up each:", ["prompts"] + [f"`{e}`" for e in engines] + ["Python us/step"],
                [[str(s["prompts"])] + [f"{s['tokens_per_s'][e]:.1f}" for e in engines]
                 + [f"{s['python_us_per_step']:.0f}"] for s in sizes])
    out += [""] + table("Ratios of those rates, medians of the ratios within a repeat:", ["prompts"] + pairs,
                        [[str(s["prompts"])] + [_ratio(s["ratios"], p) for p in pairs] for s in sizes])
    t = r["threads"]
    out += ["", f"16 threads calling `generate()` once each: {t['threads_s']:.2f} s against {t['one_call_s']:.2f} s for "
            f"one `generate_parallel` call (median of the ratios within a repeat {t['threads_over_one_call']:.2f}); "
            f"{t['same_text']} of {t['prompts']} texts identical."]
    if r.get("drift"):
        d = r["drift"]
        out += ["", f"{d['calls']} consecutive calls of 8 prompts: median time of the last 10 over the first 10 = "
                f"{d['last_over_first']:.3f}."]
    return out


def annotate(r: dict) -> List[str]:
    out: List[str] = []
    if r["docs"]:
        rows = []
        for d in r["docs"]:
            s = d["summary"]
            off, on = "newrllama, prefix cache off", "newrllama, prefix cache on"
            bb = s.get("speed_over_batched_bench", {})
            reference = [k for k in s["seconds"] if k.startswith("llama-batched-bench")]
            rows.append([str(s["docs"]), f"{s['seconds'][off]:.2f}", f"{s['seconds'][on]:.2f}",
                         f"{s['docs_per_s'][off]:.2f}", f"{s['docs_per_s'][on]:.2f}", f"{s['speedup_on_over_off']:.2f}x",
                         f"{s['prompt_tokens_decoded'][off]} / {s['prompt_tokens_decoded'][on]} "
                         f"({s['instruction_decodes_on']:.2f})", f"{s['prefill_work_off_over_on']:.1f}x less"]
                        + [f"{s['seconds'][k]:.2f}" for k in reference]
                        + [f"{bb[e]:.2f}" for e in (on, off) if e in bb] + [f"{s['same_texts']}/{s['docs']}"])
        has_bb = "speed_over_batched_bench" in r["docs"][0]["summary"]
        out += table(
            f"A {r['instruction_tokens']}-token instruction, then a distinct {r['doc_tokens']}-token document, "
            f"{r['answer_tokens']} greedy answer tokens (llama-batched-bench: `-ntg {r['batched_bench_ntg']}`, the same "
            f"decode steps), {r['n_seq']} sequences, {r['threads']} threads, embedded model, {cpu_of(r)}; "
            f"seconds: medians of {r['repeats']} repeats, engines in turn after a full-width warm-up each; speed "
            "ratios (above 1: ours faster): medians of the ratios within a repeat. Prompt tokens decoded count the "
            "shared start where it was decoded (in brackets: how many times, in shared starts).",
            ["documents", "cache off s", "cache on s", "documents/s off", "documents/s on", "speedup",
             "prompt tokens decoded off / on", "prefill work"]
            + (["bb `-kvu -pps` pieces s", "bb prompts in full s", "cache on / bb pieces", "cache off / bb in full"]
               if has_bb else []) + ["same texts"], rows)
    if r.get("mixed"):
        m = r["mixed"]
        out += [""] + table(f"Prefill of mixed lengths, without the cache, one answer token, {r['n_seq']} sequences "
                            f"(medians of {r['repeats']} repeats in turn):", ["prompts", "seconds", "ratio"],
                            [[f"{m['prompts']} of 8-40 tokens", f"{m['mixed_s']:.2f}", f"{m['mixed_over_equal']:.2f}"],
                             [f"{m['prompts']} of {m['mean_tokens']} tokens", f"{m['equal_s']:.2f}", "1"]])
    if r.get("choices"):
        c = r["choices"]
        rows = [[f"plain greedy generation, {r['answer_tokens']} tokens", str(c["plain"]["rows_per_doc"]),
                 f"{c['plain']['s_per_100']:.2f}", "1"]]
        rows += [[f"`choices`, 4 labels, {name} ({', '.join(labels)})", str(c[name]["rows_per_doc"]),
                  f"{c[name]['s_per_100']:.2f}", f"{c[name]['over_plain']:.2f}"]
                 for name, labels in r["choice_sets"].items()]
        out += [""] + table(f"{c['docs']} documents under the instruction, every engine run {c['repeats']} times in "
                            "turn; seconds per 100 documents (median) and the median of the ratios within a repeat:",
                            ["answer", "output rows per document", "s / 100 documents", "ratio to plain"], rows)
    return out


def cluster_vs_local(r: dict) -> List[str]:
    throughput = r["raw"]["throughput"][0]["order"]
    def name(engine: str) -> str:
        return engine.replace("generate_parallel", "`generate_parallel`")
    rows = [[name(e), f"{r['tokens_per_s'][e]:.1f}",
             f"{r['speed_over_local'].get(e, 1.0):.2f}"] for e in throughput]
    out = table(f"{r['prompts']} prompts of about 10 tokens, {r['max_tokens']} greedy tokens each, output file on, "
                f"{r['n_seq']} sequences in flight in every engine, {r['cores']} cores, {cpu_of(r)}; medians "
                f"of {r['repeats']} repeats, engines in turn after a full-width warm-up each; speed ratio to the local "
                "call: median of the ratios within a repeat:", ["run", "tokens/s", "speed ratio to local"], rows)
    small = r["one_token_prompts"]
    out += [""] + table(f"{r['small']} prompts of one token, per 1,000 prompts (the cluster: 2 workers x "
                        f"{r['n_seq'] // 2} sequences):",
                        ["run", "seconds", "speed ratio to local", "driver ms", "output file ms", "chunks"],
                        [[name(e), f"{v['s_per_1000']:.2f}", f"{v['speed_over_local']:.2f}",
                          f"{v['driver_ms_per_1000']:.1f}" if "driver_ms_per_1000" in v else "-",
                          f"{v['file_ms_per_1000']:.1f}" if "file_ms_per_1000" in v else "-",
                          str(v.get("chunks", "-"))] for e, v in small.items()])
    out += ["", "Start-up (Ray runtime and model loads): " + ", ".join(f"{e} {s:.1f} s" for e, s in r["startup_s"].items())
            + f". Sizing: {r['prompts_per_hour_per_worker']:,.0f} prompts an hour per worker of "
            f"{max(1, r['cores'] // 2)} thread(s) at this size."]
    return out


def server(r: dict) -> List[str]:
    return table(f"{r['prompts']} prompts of about 10 tokens, {r['max_tokens']} greedy tokens each, streamed; server "
                 f"`--n-seq-max {r['n_seq']} --threads {r['threads']}`, the clients on the same cores, "
                 f"{cpu_of(r)}; one in-process `generate_parallel` call of the same prompts on a context of "
                 f"the same shape: {r['generate_parallel_tokens_per_s']:.1f} tokens/s. Medians of {r['repeats']} "
                 "repeats, engines in turn after a full-width warm-up each; ratio: median of the ratios within a "
                 "repeat:", ["clients", "tokens/s", "ratio to `generate_parallel`", "time to first token, median",
                             "90th percentile"],
                 [[str(row["clients"]), f"{row['tokens_per_s']:.1f}", f"{row['over_generate_parallel']:.2f}",
                   f"{row['ttft_median_s']:.3f} s", f"{row['ttft_p90_s']:.3f} s"] for row in r["rows"]])


def stream_latency(r: dict) -> List[str]:
    return table(f"{r['batch_clients']} clients sending 64 distinct prompts of ~450 tokens (4 greedy tokens each) and "
                 f"one client streaming answers of {r['stream_tokens']} greedy tokens one after another, {r['n_seq']} "
                 f"sequences (slots), {r['threads']} threads, embedded model, {cpu_of(r)}; medians of "
                 f"{r['repeats']} repeats, engines in turn; gaps between streamed tokens that arrived while the "
                 "batch ran:",
                 ["engine", "batch s", "batch speed vs llama-server", "first token s", "gap median s", "gap p90 s",
                  "gap max s"],
                 [[name, f"{m['seconds']:.1f}", f"{r['batch_speed_vs_llama_server'].get(name, 1.0):.2f}",
                   f"{m['first_token_median_s']:.1f}", f"{m['gap_median_s']:.2f}", f"{m['gap_p90_s']:.2f}",
                   f"{m['gap_max_s']:.2f}"] for name, m in r["medians"].items()])


def findings(r: dict) -> List[str]:
    out = table(f"Share of \"{r['label']}\" among the {r['stories']} Reuters stories (cut at {r['cut']} characters), "
                f"instruct model `{r['model']}`, {r['draws']} random samples of {r['coded']} taken as coded, "
                f"{cpu_of(r)}: coverage of the share of every human code by each 95% interval, and its "
                "median width:",
                ["prompt", "kappa", "naive share", "true share", "PPI++ (probabilities)", "PPI++ (labels)",
                 "coded only", "naive"],
                [[name, f"{p['kappa']:.3f}", f"{p['naive_share']:.3f}", f"{p['true_share']:.3f}"]
                 + [f"{p['coverage'][k]:.3f} ({p['median_width'][k]:.3f})"
                    for k in ("ppi, probabilities", "ppi, labels", "coded only", "naive")]
                 for name, p in r["prompts"].items()])
    phases = next(iter(r["prompts"].values())).get("two_phase")
    if phases:
        out += [""] + table(f"Two phases: {r['coded'] // 2} random stories coded, then {r['coded'] - r['coded'] // 2} "
                            "more drawn by `plan_coding()`; PPI++ from the probabilities, coverage (median width):",
                            ["prompt"] + list(phases),
                            [[name] + [f"{p['two_phase'][k]['coverage']:.3f} ({p['two_phase'][k]['median_width']:.3f})"
                                       for k in phases] for name, p in r["prompts"].items()])
    regressor = r.get("regressor")
    if regressor:
        first = next(iter(regressor.values()))
        out += [""] + table(f"A model-coded regressor: the coefficient of \"{first['regressor']}\" in a least-squares "
                            f"regression of the story's {first['outcome']} on it (from every human code), same "
                            "samples; coverage (median width) of each 95% interval, and the naive fit on the "
                            "model's probabilities:",
                            ["prompt", "true coefficient", "PPI++", "coded only", "naive estimate (covers)"],
                            [[name, f"{g['true_coefficient']:.3f}"]
                             + [f"{g['coverage'][k]:.3f} ({g['median_width'][k]:.3f})" for k in ("ppi", "coded only")]
                             + [f"{g['naive']['estimate']:.3f} ({'yes' if g['naive']['covers'] else 'no'})"]
                             for name, g in regressor.items()])
    return out


SHORT_SETS = {"fortunes": "quotations by fortune file", "packages": "Debian packages by section",
              "wordnet": "WordNet definitions by lexicographer file"}


def short_texts(r: dict) -> List[str]:
    rows = []
    for name, st in r["sets"].items():
        for layout, m in st["layouts"].items():
            rows.append([name, f"{st['texts']} ({st['mean_characters']:.0f} chars)", layout, f"{m['seconds']:.1f}",
                         f"{m['ratio_to_reference']:.2f}", f"{m['accuracy']:.3f}", f"{m['kappa']:.3f}",
                         f"{m['order_agreement']:.3f}"])
    runs = "; ".join(f"{name} {len(next(iter(st['layouts'].values()))['all_seconds'])}" for name, st in r["sets"].items())
    return table(f"Prompt layouts on human-sorted texts, instruct model `{r['model']}`, {cpu_of(r)}: seconds "
                 f"(median of the runs: {runs}), ratio to the reference layout, accuracy and kappa against the human sorting, and order agreement (the same "
                 "label with the labels listed in another order):",
                 ["set", "texts", "layout", "seconds", "x reference", "accuracy", "kappa", "order agreement"], rows)


CALIBRATION_RULES = {  # the rules a calibration results file compares, as its keys name them
    "calibrated": "calibrated as calibrate() does",
    "previous rule": "by the rule before (always a fit)",
    "log-loss": "decided by cross-validated log-loss (criterion \"log-loss\")",
}


def calibration(r: dict) -> List[str]:
    first = next(c for st in r["sets"].values() for c in st["cures"].values())
    rules = [k for k in first["median_kappa"] if k != "uncalibrated"]
    by_rule = isinstance(first["chose_no_calibration"], dict)  # files before the criterion: the default's count
    rows = []
    for name, st in r["sets"].items():
        for cure, c in st["cures"].items():
            m, none = c["median_kappa"], c["chose_no_calibration"]
            row = [name, f"{st['texts']}", cure, f"{c['coded']}", f"{m['uncalibrated']:.3f}"]
            for rule in rules:
                chose = none[rule] if by_rule else (none if rule == "calibrated" else None)
                row += [f"{m[rule]:.3f}", "" if chose is None else f"{chose}/{c['draws']}", f"{c['draws_lowered'][rule]}"]
            rows.append(row)
    default = ("(by default: a fit applied only where it gives the held-out coded texts better labels, criterion "
               "\"kappa\")" if by_rule else "(when this ran: no calibration one of the candidates, by log-loss)")
    described = ", ".join(CALIBRATION_RULES[rule] + (f" {default}" if rule == "calibrated" else "") for rule in rules)
    both = any("auto, one order" in st["cures"] for st in r["sets"].values())
    auto = (" Cure `auto` uncalibrated is the default's labels (one order on the one-liners), calibrated the labels "
            "annotate() scores for calibration (two orders for every text); `auto, one order` is the default's "
            "one-order labels calibrated." if both else "")
    out = table(f"Calibration on a few coded texts, instruct model `{r['model']}`, {cpu_of(r)}: median "
                f"Cohen's kappa on the texts not coded over the draws: uncalibrated, {described}; for each, how "
                f"often the coded texts chose no calibration, and in how many draws calibrating lowered kappa.{auto}",
                ["set", "texts", "cure", "coded", "uncalibrated"] + [h for rule in rules
                                                                     for h in (rule, "none chosen", "lowered")], rows)
    natural = [(name, st["cures"]["auto"]["natural_flow"]) for name, st in r["sets"].items()
               if "natural_flow" in st["cures"].get("auto", {})]
    if natural:
        out += [""] + table("The first draw's codes given to annotate() as the calibration (`calibration=codes`, one "
                            "call): kappa on the texts not coded, beside calibrate() on the labels scored with "
                            "`calibration=\"pending\"` and applied to them, and whether every label and probability "
                            "is the same:", ["set", "calibration=codes", "pending, calibrate, apply", "same",
                                             "seconds"],
                            [[name, f"{n['kappa']:.3f}", f"{n['pending_calibrated_kappa']:.3f}",
                              "yes" if n["same_as_pending_calibrated"] else "no", f"{n['seconds']:.0f}"]
                             for name, n in natural])
    return out


def cascade(r: dict) -> List[str]:
    rows = []
    for name, st in r["sets"].items():
        rows.append([name, "small alone", f"{st['small']['kappa']:.3f}", "", f"{st['small']['seconds']:.0f}",
                     f"{st['small']['seconds'] / st['large']['seconds']:.2f}", "", ""])
        rows.append([name, "large alone", f"{st['large']['kappa']:.3f}", "", f"{st['large']['seconds']:.0f}", "1.00",
                     "", ""])
        for share, c in st["cascade"].items():
            ppi = c.get("ppi")
            rows.append([name, f"cascade, share {share}", f"{c['kappa']:.3f}", f"{c['kappa'] - st['large']['kappa']:+.3f}",
                         f"{c['seconds']:.0f}", f"{c['time_of_large']:.2f}",
                         f"{c['n_second']} of {st['texts']}" + ("" if c["each_text_as_its_model_alone"] else " (differ)"),
                         f"{ppi['coverage']:.3f} ({ppi['draws']} draws of {ppi['coded']})" if ppi else ""])
    out = table(f"A cascade from `{r['small_model']}` to `{r['large_model']}` (annotate()'s defaults), "
                 f"{cpu_of(r)}: Cohen's kappa against the human sorting, its difference from the large "
                 "model alone, seconds and the share of the large model's time (the cascade's: the small model on "
                 "every text, the large one on the texts sent on), texts sent on (each text's labels those of its "
                 "model alone, as batch invariance makes them), and the coverage of prevalence()'s 95% intervals "
                 "with the cascade's labels and random coded samples, over labels and draws:",
                 ["set", "labels by", "kappa", "vs large", "seconds", "x large's time", "sent on", "PPI coverage"],
                 rows)
    chosen = [(name, st["choice"]) for name, st in r["sets"].items() if "choice" in st]
    if chosen:
        out += [""] + table("The share `choose_cascade_share()` picks from a random coded sample (the large model "
                            "labelling the coded texts only), over draws: the median share, and the cascade at the "
                            "picked share against the large model alone on the texts not coded (Cohen's kappa), with "
                            "its time estimated as the small model's plus the share of the large model's:",
                            ["set", "draws of", "median share", "kappa vs large (median)", "within 0.02 of large",
                             "estimated x large's time"],
                            [[name, f"{c['draws']} of {c['coded']}", f"{c['median_share']:g}",
                              f"{c['median_kappa_difference']:+.3f}", f"{c['within_002']:.2f}",
                              f"{c['estimated_time_of_large']:.2f}"] for name, c in chosen])
    return out


def corpus_time(r: dict) -> List[str]:
    n = r["corpus_size"]
    return table(f"`{r['model']}` labelling with annotate()'s defaults (no context given: one sized for the texts; "
                 f"{len(r['labels'])} labels), {cpu_of(r)}, 2 threads: text tokens, seconds, plan_annotation()'s "
                 f"estimate from a sample of {r['plan_sample']} texts, and the hours {n:,} such texts take at the "
                 "measured rate:", ["texts", "n", "tokens: mean", "largest", "failed", "seconds", "per text",
                                    "per 1,000 tokens", "plan's estimate", f"hours for {n:,}"],
                 [[name, str(c["texts"]), f"{c['mean_tokens']:.0f}", str(c["max_tokens"]), str(c["failed"]),
                   f"{c['seconds']:.0f}", f"{c['seconds_per_text']:.2f}", f"{c['seconds_per_1000_tokens']:.2f}",
                   f"{c['plan_seconds']:.0f}" if c["plan_seconds"] is not None else "", f"{c[f'hours_for_{n}']:.1f}"]
                  for name, c in r["corpora"].items()])


def choice_rounding(r: dict) -> List[str]:
    shapes = [str(n) for n in r["shapes"]]
    return table(f"Log-probability of a label's first token when the prompt's step held other rows, {cpu_of(r)} "
                 f"(step sizes {', '.join(shapes)}); spread: largest minus smallest over the step sizes; engine gap: "
                 "against llama-cpp-python alone:", ["case", "label", "chat"] + [f"n = {n}" for n in shapes]
                 + ["spread", "engine gap"],
                 [[str(row["case"]), row["label"], "yes" if row["chat"] else "no"]
                  + [f"{row['log_prob'][n]:.6f}" for n in shapes] + [f"{row['spread']:.2e}", f"{row['engine_gap']:.2e}"]
                  for row in r["rows"]])


def invariance_cost(r: dict) -> List[str]:
    sizes = list(r["sizes"].values())
    variants = list(sizes[0]["tokens_per_s"])
    return table(f"{r['prompt_tokens']}-token prompts, {r['max_tokens']} greedy tokens each, {r['n_threads']} threads, "
                 f"embedded model, {cpu_of(r)}; generated tokens/s, medians of {r['repeats']} repeats in turn, "
                 "each variant in a fresh process; in brackets: speed ratio to llama-batched-bench (median of the "
                 "ratios within a repeat):", ["prompts"] + variants,
                 [[n] + [f"{s['tokens_per_s'][v]:.1f} ({s['speed_vs_llama_batched_bench'][v]:.2f})" for v in variants]
                  for n, s in r["sizes"].items()])


def attention(r: dict) -> List[str]:
    workloads = r["workloads"]
    variants = list(next(iter(workloads.values()))["seconds"])

    def repeats(w: dict, v: str) -> str:
        return "the same in every run" if len(w["answers"][v]) == 1 else f"{len(w['answers'][v])} different"
    return table(f"Seconds (median of {r['repeats']} repeats in turn, each run a fresh process), {r['n_threads']} "
                 f"threads, embedded model, {cpu_of(r)}; in brackets: speed ratio to llama.cpp unpatched "
                 "(median of the ratios within a repeat); the patches each process loaded are in the second table:", ["workload"] + variants,
                 [[name] + [f"{w['seconds'][v]:.2f} ({w['speed_vs_unpatched'][v]:.2f})" for v in variants]
                  for name, w in workloads.items()]) + [""] + table(
        "Answers (token ids) of each variant over the repeats, and the llama.cpp patch its processes loaded:",
        ["workload"] + variants,
        [[name] + [f"{repeats(w, v)}; patch: {', '.join(w['llama_cpp_patch'][v])}" for v in variants]
         for name, w in workloads.items()])


def unified_kv(r: dict) -> List[str]:
    return table(f"{r['docs']} prompts of about 450 tokens, {r['n_seq']} sequences, {r['threads']} threads, "
                 f"`{r['model']}`, {cpu_of(r)}; seconds (median of {r['repeats']}) with one KV stream shared "
                 "by every sequence (unified) and with a stream per sequence (split):", ["run", "seconds"],
                 [[name, f"{t:.1f}"] for name, t in r["median_s"].items()]) + [""] + table(
        "Unified over split (time):", ["answer", "ratio"],
        [[name, f"{v:.3f}"] for name, v in r["unified_over_split"].items()])


def amx(r: dict) -> List[str]:
    names = list(r["seconds"])
    return table(f"{r['docs']} documents under one instruction, each scored against {len(r['labels'])} labels, "
                 f"{r['n_seq']} sequences, {r['threads']} threads, prefix cache on, {model_of(r)}, "
                 f"{cpu_of(r)}; medians of {r['repeats']} repeats in turn, each run a fresh process:",
                 ["kernel", "seconds", "prompt tokens/s"],
                 [[n, f"{r['seconds'][n]:.2f}", f"{r['prompt_tokens_per_s'][n]:.0f}"] for n in names]) + [
        "", f"Speed with the tiles: {r['speed_with_tiles']:.2f}x (median of the ratios within a repeat); every "
        f"process's label log-probabilities the same bits: {'yes' if r['same_bits'] else 'no'}."]


def limits(r: dict) -> List[str]:
    lim = r["limits"]
    amx_peak = f"; {lim['amx_int8_gmacs']:.0f} billion/s on AMX tiles" if lim["amx_int8_gmacs"] else "; no AMX"
    has_amx = any("prefill_share_of_amx_peak" in s for s in r["summary"].values())
    out = [f"The machine, {lim['threads']} threads at once: reads a 1 GiB buffer at {lim['read_gb_per_s']:.1f} GB/s; "
           f"int8 multiply-adds {lim['vector_int8_gmacs']:.0f} billion/s on the vector unit ({lim['vector_unit']})"
           f"{amx_peak}. {model_of(r)}: {r['decode_bytes_per_token'] / 1e9:.3f} GB of weights read per decode "
           f"step, {r['matmul_macs_per_prompt_token'] / 1e9:.3f} billion multiply-adds of weight matrices per prompt "
           "token.", ""]
    return out + table(
        f"One prompt of {r['prompt_tokens']} tokens, then up to {r['decode_steps']} greedy decode steps, "
        f"{r['n_threads']} threads, {cpu_of(r)}; medians of {r['repeats']} repeats, engines in turn:",
        ["engine", "prefill tokens/s", "share of the vector peak"] + (["share of the AMX peak"] if has_amx else [])
        + ["decode tokens/s", "GB/s read", "share of the read bandwidth"],
        [[f"`{e}`", f"{s['prefill_tokens_per_s']:.1f}", f"{s['prefill_share_of_vector_peak']:.1%}"]
         + ([f"{s['prefill_share_of_amx_peak']:.1%}"] if has_amx else [])
         + [f"{s['decode_tokens_per_s']:.1f}", f"{s['decode_gb_per_s']:.1f}", f"{s['decode_share_of_read_bandwidth']:.0%}"]
         for e, s in r["summary"].items()])


def picked_codes(r: dict) -> List[str]:
    kinds = list(next(iter(r["sets"].values()))["warned_share"])
    return table(f"{r['draws']} draws of {r['texts']} texts from each human-sorted set, labelled by `{r['model']}` "
                 "(annotate()'s defaults); the coded texts given to prevalence() as a bare truth vector: share of "
                 "draws in which CodingSampleWarning said they do not look like a random sample (false-alarm rate "
                 "stated: 1 in 1,000):", ["set", "texts in the set", "kappa of the labels"] + kinds,
                 [[name, str(s["n_texts_in_set"]), f"{s['kappa']:.2f}"] + [f"{s['warned_share'][k]:.1%}" for k in kinds]
                  for name, s in r["sets"].items()])


REPORTS: Dict[str, Callable[[dict], List[str]]] = {
    "validity": validity, "questions": questions, "question-layout": question_layout, "vs-llama-server": vs_llama_server,
    "two-contexts": two_contexts, "openmp-neighbours": openmp_neighbours, "determinism": determinism, "stream-latency": stream_latency,
    "cluster-shared-instruction": cluster_shared_instruction, "long-prompts": long_prompts, "parallel": parallel,
    "annotate": annotate, "cluster-vs-local": cluster_vs_local, "server": server, "findings": findings,
    "short-texts": short_texts, "calibration": calibration, "choice-rounding": choice_rounding, "invariance-cost": invariance_cost,
    "attention": attention, "unified-kv": unified_kv, "amx": amx, "limits": limits, "picked-codes": picked_codes,
    "cascade": cascade, "corpus-time": corpus_time}

# The benchmarks page's sections, in reading order: what each kind of results file measures (no figures here:
# those come from the files).
SECTIONS = {
    "annotate": ("The annotation workload", "One long instruction and many documents, with the prefix cache on and "
                 "off, beside llama-batched-bench given the same work (`bench/bench_annotate.py`)."),
    "vs-llama-server": ("Against llama-server", "The same workloads sent over HTTP by concurrent clients to "
                        "`newrllama serve` and to llama-server built from the same llama.cpp "
                        "(`bench/bench_vs_llama_server.py`)."),
    "parallel": ("Parallel generation", "`generate_parallel` and the C driver against llama-batched-bench "
                 "(`bench/bench_parallel.py`)."),
    "limits": ("Against the machine's limits", "Prefill as a share of the int8 multiply-add peak and one-prompt "
               "decode as a share of the read bandwidth, both measured on the machine, beside llama-batched-bench "
               "(`bench/bench_limits.py`)."),
    "amx": ("AMX tiles", "The annotation workload on a K-quant model with newrllama's AMX kernel and without it "
            "(`bench/bench_amx.py`)."),
    "invariance-cost": ("The cost of batch invariance", "Generation with each rule of the batch-invariant mode lifted "
                        "(`bench/bench_invariance_cost.py`)."),
    "attention": ("Attention over bf16 cells", "The batch-invariant mode's attention with newrllama's patches of "
                  "llama.cpp, without them, and llama.cpp's own f16 attention (`bench/bench_attention.py`); from "
                  "commit c2ed979 on, the patches include the matmul of Q5_0 and Q8_0 weights."),
    "determinism": ("Same input, same output", "The share of identical answers and probabilities in each case of "
                    "reuse, concurrency and batching (`bench/bench_determinism.py`)."),
    "validity": ("Labels on real text", "Reuters stories coded by the instruct model against their human topics, "
                 "with each order cure and calibration (`bench/bench_validity.py`)."),
    "short-texts": ("Short texts", "Prompt layouts on one-line human-sorted texts and on Reuters stories "
                    "(`bench/bench_short_texts.py`)."),
    "calibration": ("Calibration on sets never tuned on", "Calibration on a few coded texts of sets it was never tuned "
                    "on, with each order cure (`bench/bench_calibration.py`)."),
    "corpus-time": ("How long a corpus takes", "A corpus labelled as a researcher labels it, with plan_annotation()'s "
                    "estimate beside the time it took (`bench/bench_corpus_time.py`)."),
    "cascade": ("The cascade", "A small model's labels, with a larger model's for the texts the small one is least "
                "sure of, against each model alone (`bench/bench_cascade.py`)."),
    "question-layout": ("Where the definitions go", "Label definitions in the instruction or beside the labels "
                        "(`bench/bench_question_layout.py`)."),
    "questions": ("Several questions per text", "A codebook of several questions against one call per question "
                  "(`bench/bench_questions.py`)."),
    "picked-codes": ("Codes of texts the model chose", "Whether codes of least_confident()'s texts, given without "
                     "their design, are noticed, and random samples let through (`bench/bench_picked_codes.py`)."),
    "findings": ("Shares with valid intervals", "Coverage of prediction-powered intervals from the model's labels and "
                 "a coded sample (`bench/bench_findings.py`)."),
    "long-prompts": ("Long prompts, nothing shared", "Prefill of distinct long prompts (`bench/bench_long_prompts.py`)."),
    "server": ("The server", "Streamed answers to concurrent clients (`bench/bench_server.py`)."),
    "stream-latency": ("Streaming beside a batch", "Gaps between streamed tokens while a batch runs "
                       "(`bench/bench_stream_latency.py`)."),
    "two-contexts": ("Two contexts in one process", "One context's speed while another works "
                     "(`bench/bench_two_contexts.py`)."),
    "openmp-neighbours": ("Beside other OpenMP threads", "One prompt's speed once another thread of the process has "
                          "run an OpenMP region: newrllama's C driver or llama-cpp-python on the main thread, or "
                          "data.table in an R session "
                          "(`bench/bench_openmp_neighbours.py`)."),
    "cluster-vs-local": ("The cluster", "A Ray cluster of workers against one local call (`bench/bench_cluster.py`)."),
    "cluster-shared-instruction": ("The cluster and a shared instruction", "How often a cluster decodes a shared "
                                   "instruction (`bench/bench_cluster.py`)."),
    "choice-rounding": ("Rounding of label probabilities", "A label's log-probability in steps of other sizes "
                        "(`bench/choice_rounding.py`)."),
    "unified-kv": ("One KV stream or one per sequence", "The unified stream against a stream per sequence "
                   "(a benchmark script since removed)."),
}
assert set(SECTIONS) == set(REPORTS)
RESULTS = Path(__file__).resolve().parent / "results"


def kind_of(path: Path) -> str:
    # Longest first: "question-layout-" must not be read as "questions-" or the reverse.
    kind = next((k for k in sorted(REPORTS, key=len, reverse=True) if path.name.startswith(k + "-")), None)
    if kind is None:
        raise ValueError(f"no report for {path} (known: {', '.join(REPORTS)})")
    return kind


def cpu_of(r: dict) -> str:
    """The CPU's name and, where the file records it, its kind: the kernels and so the speed differ between kinds
    that share a name."""
    m = r["machine"]
    return m["cpu"] + (f" ({m['cpu_kind']})" if m.get("cpu_kind") else "")


def provenance(path: Path, r: dict) -> str:
    """Which code, command and machine a file's figures come from."""
    m = r["machine"]
    code = (f"commit `{m['commit'][:12]}{'+changes' if m['commit'].endswith('+changes') else ''}`" if "commit" in m
            else f"commit not recorded (the file was added in `{m['committed_with'][:12]}`)")
    when = f", run {m['time']}" if "time" in m else ""
    return f"File `bench/results/{path.name}`: {code}, command `{m['command']}`, {cpu_of(r)}{when}."


def _date_and_rerun(path: Path) -> tuple:
    """bench_results.write_results names a file <kind>-<date>-<cpu>.json and its reruns -2, -3, ..."""
    m = re.search(r"(\d{4}-\d{2}-\d{2})-.*?(?:-(\d{1,2}))?\.json$", path.name)
    return (m.group(1), int(m.group(2) or 1)) if m else ("", 0)


def page(results: Path = RESULTS) -> List[str]:
    """The benchmarks page: every results file, newest first within its section."""
    out = ["# Benchmarks", "",
           "<!-- Generated by `bench/report.py --page` from bench/results/: do not edit; "
           "tests/python/docs/test_figures_match_results.py checks it. -->", "",
           "Every figure in this documentation comes from a results file in `bench/results/`, written by the benchmark "
           "script named in its section. Each file records the commit of the code it measured, the command, the "
           "machine and (for later files) the time; a rerun writes a new file and never overwrites one. Timings "
           "are ratios within one run, both sides given the same work and warm-up, taken in turn on a shared "
           "machine.", ""]
    files: Dict[str, List[Path]] = {k: [] for k in SECTIONS}
    for path in sorted(results.glob("*.json")):
        files[kind_of(path)].append(path)
    for kind, (title, what) in SECTIONS.items():
        if not files[kind]:
            continue
        out += [f"## {title}", "", what, ""]
        for path in sorted(files[kind], key=lambda p: (_date_and_rerun(p), p.name), reverse=True):
            r = json.loads(path.read_text())
            out += [f"### {path.stem}", "", provenance(path, r), ""] + REPORTS[kind](r) + [""]
    return out


def _latest(kind: str, results: Path, name_has: str = "", model: str = "", cpu: str = "") -> Tuple[Path, dict]:
    """The newest file of a kind (and model and CPU, if named) among those that record the commit of the code they
    measured: a headline figure must be tied to its code."""
    files = [(p, json.loads(p.read_text())) for p in results.glob(f"{kind}-*.json")
             if kind_of(p) == kind and name_has in p.name]
    files = [(p, r) for p, r in files if (not model or r["machine"].get("model", EMBEDDED) == model)
             and (not cpu or cpu_of(r) == cpu)]
    return max(((p, r) for p, r in files if "commit" in r["machine"]), key=lambda f: (_date_and_rerun(f[0]), f[0].name))


def _latest_of_model(kind: str, results: Path, model: str, name_has: str = "", cpu: str = ""
                     ) -> Optional[Tuple[Path, dict]]:
    try:
        return _latest(kind, results, name_has, model, cpu)
    except ValueError:  # no such file that records its commit
        return None


def _cpus(kind: str, results: Path, model: str) -> List[str]:
    """The CPUs that files of a kind and model were measured on, by name and kind. Older files name the CPU alone:
    those stand for their CPU only where no file of that name and this model records its kind, so that a newer
    figure of one kind is not shown beside an older one of unknown kind."""
    found = {cpu_of(r) for r in (json.loads(p.read_text()) for p in results.glob(f"{kind}-*.json")
                                 if kind_of(p) == kind) if r["machine"].get("model", EMBEDDED) == model}
    return sorted(c for c in found if not any(other.startswith(c + " (") for other in found))


def _anchor(path: Path) -> str:
    return "docs/benchmarks.md#" + re.sub(r"[^a-z0-9-]", "", path.stem.lower())


def headline(results: Path = RESULTS) -> List[str]:
    """The README's table: one figure per claim, from the newest file of its kind."""
    rows = []
    path, r = _latest("annotate", results)
    s = max((d["summary"] for d in r["docs"]), key=lambda s: s["docs"])
    rows.append([f"Annotation workload, {s['docs']} documents under one instruction, {model_of(r)}: prefix cache on "
                 "against off",
                 f"{s['speedup_on_over_off']:.1f}x faster", path])
    # Prefill speed, and so these ratios, moves with the CPU as generation's does: the newest file of each.
    for model, cpu in ((m, c) for m in (EMBEDDED, K_QUANT_MODEL) for c in _cpus("vs-llama-server", results, m)):
        found = _latest_of_model("vs-llama-server", results, model, "annotation", cpu)
        if found:
            path, r = found
            swa = r.get("against_swa_full", {})
            rows.append([f"The same workload over HTTP, 16 clients, {model_of(r)}, {cpu}: `newrllama serve` against "
                         "llama-server as started by default (in brackets: against `--swa-full`, its best setting for "
                         "shared starts), instruction new / cached",
                         " / ".join(f"{w['ratios']['newrllama serve']:.1f}x"
                                    + (f" ({swa[name]:.2f}x)" if name in swa else "")
                                    for name, w in r["workloads"].items()) + " faster", path])
    # Generation is the figure that moves most with the CPU (AMX, VNNI or AVX2 alone): the newest file of each.
    for model, cpu in ((m, c) for m in (EMBEDDED, K_QUANT_MODEL) for c in _cpus("parallel", results, m)):
        found = _latest_of_model("parallel", results, model, cpu=cpu)
        if found:
            path, r = found
            rows.append([f"Parallel generation against llama-batched-bench, {model_of(r)}, {cpu} ("
                         + ", ".join(f"{n} prompt{'' if int(n) == 1 else 's'}" for n in r["sizes"]) + ")",
                         " / ".join(f"{s['summary']['ratios']['generate_parallel / llama-batched-bench']:.2f}x"
                                    for s in r["sizes"].values()) + " the speed", path])
    for model, cpu in ((m, c) for m in (EMBEDDED, K_QUANT_MODEL) for c in _cpus("limits", results, m)):
        found = _latest_of_model("limits", results, model, cpu=cpu)
        if found:
            path, r = found
            ours, ref = r["summary"]["newrllama"], r["summary"].get("llama-batched-bench")

            def share(key: str) -> str:
                return f"{ours[key]:.0%}" + (f" ({ref[key]:.0%})" if ref else "")
            amx = ", " + share("prefill_share_of_amx_peak") + " of AMX's" if "prefill_share_of_amx_peak" in ours else ""
            rows.append([f"One prompt against what the machine allows, {model_of(r)}, {cpu}: decode's weight reads "
                         "as a share of the measured read bandwidth; prefill's multiply-adds as a share of the "
                         "measured int8 peak of the vector unit (and of AMX tiles, where the CPU has them); in "
                         "brackets: llama-batched-bench's",
                         f"decode {share('decode_share_of_read_bandwidth')}; prefill "
                         f"{share('prefill_share_of_vector_peak')} of the vector unit's{amx}", path])
    found = _latest_of_model("amx", results, K_QUANT_MODEL)
    if found:
        path, r = found
        rows.append([f"The annotation workload (nearly all prefill), {model_of(r)}, {cpu_of(r)}: AMX tiles "
                     "against the same build with NEWRLLAMA_AMX=off (the AVX2 kernel, with VNNI where the CPU has it); "
                     "the same bits", f"{r['speed_with_tiles']:.2f}x the speed; "
                     + ("identical" if r["same_bits"] else "different"), path])
    for model in (EMBEDDED, K_QUANT_MODEL):
        found = _latest_of_model("determinism", results, model)
        if not found:
            continue
        path, r = found
        default = next(n for n in r["raw"][0]["runs"] if "default" in n and "previous" not in n)
        pairs = [c for repeat in r["raw"] for case, c in repeat["runs"][default]["cases"].items()
                 if not case.endswith("gap")]
        rows.append([f"Identical answers and probabilities, bit for bit, across reuse, threads and batches (default), "
                     f"{model_of(r)}; annotate(): {instruct_model_of(r)}",
                     f"{sum(p[0] for p in pairs)} of {sum(p[1] for p in pairs)}", path])
    path, r = _latest("attention", results)
    mode = {name: statistics.median(rep["runs"]["batch_invariant=False"]["seconds"] /
                                    rep["runs"]["batch_invariant=True"]["seconds"] for rep in w["raw"])
            for name, w in r["workloads"].items() if name != "generation"}
    rows.append(["The batch-invariant mode (default) against `batch_invariant=False` (llama.cpp's f16 attention): "
                 "documents after a long instruction, long distinct prompts",
                 " / ".join(f"{v:.2f}x" for v in mode.values()) + " the speed", path])
    path, r = _latest("short-texts", results, model=SMALL_INSTRUCT)  # the headline's instruct model, every set
    reuters = r["sets"]["reuters"]["layouts"]
    rows.append(["Reuters stories, instruct model: Cohen's kappa of `annotate()` against the human topics (in "
                 "brackets: one order, labels listed in the instruction)",
                 f"{reuters['annotate()']['kappa']:.2f} ({reuters['reference']['kappa']:.2f})", path])
    short = [(n, st["layouts"]["annotate()"], st["layouts"]["reference"]) for n, st in r["sets"].items()
             if n != "reuters"]
    rows.append(["One-line human-sorted texts (" + ", ".join(SHORT_SETS.get(n, n) for n, _, _ in short) + "): "
                 "`annotate()` time against one order with the labels in the instruction, its accuracy (in brackets: "
                 "that layout's), and the share of labels that stay the same when the labels are listed in another "
                 "order",
                 "; ".join(f"{n} {m['ratio_to_reference']:.2f}x, {m['accuracy']:.2f} ({ref['accuracy']:.2f}), "
                           f"{m['order_agreement']:.2f}" for n, m, ref in short), path])
    path, r = _latest("findings", results)
    cover = [p["coverage"]["ppi, probabilities"] for p in r["prompts"].values()]
    rows.append(["Coverage of 95% PPI++ intervals for a share, from the model's probabilities and a coded sample",
                 " / ".join(f"{c:.3f}" for c in cover), path])
    return ["<!-- Generated by `bench/report.py --headline`: do not edit. -->", "",
            "| claim | figure | results |", "|---|---|---|"] + [
        f"| {claim} | {figure} | [{path.stem}]({_anchor(path)}) |" for claim, figure, path in rows]


def main(args: List[str]) -> int:
    if args == ["--page"]:
        print("\n".join(page()).rstrip("\n"))
        return 0
    if args == ["--headline"]:
        print("\n".join(headline()))
        return 0
    for path in map(Path, args):
        try:
            kind = kind_of(path)
        except ValueError as e:
            print(e, file=sys.stderr)
            return 1
        print(f"<!-- from {path.as_posix()} by bench/report.py -->")
        print("\n".join(REPORTS[kind](json.loads(path.read_text()))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
