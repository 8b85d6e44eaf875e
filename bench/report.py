"""Markdown tables from committed benchmark results (bench/results/<name>-<date>-<cpu>[-<rerun>].json), for the README.

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
    return table(f"{r['docs']} Reuters stories, {model}, {r['machine']['cpu']}, median of {r['repeats']} runs in "
                 "turn:", ["run", "seconds", "ratio to one question"] + (["prompt tokens decoded"] if decoded else []),
                 [[name, f"{run['median_s']:.1f}", f"{run['over_one']:.2f}"]
                  + ([f"{run['prompt_tokens_decoded']:.0f}"] if decoded else []) for name, run in r["runs"].items()])


def question_layout(r: dict) -> List[str]:
    return table(f"Instruct model `{r['model']}`, {r['stories']} Reuters stories cut at {r['cut']} characters, "
                 f"instruction \"{r['instruction']}\", debias \"reverse\", {r['machine']['cpu']}:",
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
        f"{r['n_ctx'] // r['n_seq']} cells, {r['threads']} threads, embedded model, {r['machine']['cpu']}; medians over "
        f"{r['repeats']} repeats (ratio to llama-server: median of the ratios within a repeat):",
        ["workload", "engine", "rate", "ratio"], rows) + [""] + table(
        "In process, beside the servers:", ["comparison", "ratio"],
        [[name, f"{value:.2f}"] for name, value in r["in_process"].items()]) + ([""] + table(
            "`newrllama serve` against `llama-server --swa-full` (median of the ratios within a repeat):",
            ["workload", "ratio"], [[name, f"{value:.2f}"] for name, value in r["against_swa_full"].items()])
            if r.get("against_swa_full") else [])


def two_contexts(r: dict) -> List[str]:
    return table(f"{r['n_seq']} prompts x {r['max_tokens']} greedy tokens on context A, {r['threads']} threads, embedded "
                 f"model, {r['machine']['cpu']}; medians of {r['repeats']} runs, cases in rotating order:",
                 ["case", "tokens/s", "ratio to alone"],
                 [[name, f"{case['median_tokens_per_s']:.1f}", f"{case['over_alone']:.2f}"]
                  for name, case in r["cases"].items()])


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
                  f"{len(r['raw'])} repeats, embedded model (annotate: instruct model), {r['machine']['cpu']}, commit "
                  f"{r['machine']['commit'][:10]}:",
                  ["case"] + names, rows)
    lines.append("")
    return lines + table("Time against the default (median of the ratios within a repeat, "
                         f"{len(r['raw'])} repeats in turn):", ["variant", "generation, 32 prompts", "annotate, 70 texts"],
                         [[n, f"{t['generation, 32 prompts seconds']:.2f}", f"{t['annotate, 70 texts seconds']:.2f}"]
                          for n, t in r["time_against_default"].items()])


def cluster_shared_instruction(r: dict) -> List[str]:
    repeats = f"; seconds: medians of {r['repeats']} repeats in turn after a full-width warm-up each" \
        if "repeats" in r else ""
    return table(f"{r['docs']} prompts under one {r['instruction_tokens']}-token instruction, 4 greedy tokens each, "
                 f"{r['machine']['cpu']}; the cluster has 1 worker and sends {r['chunks']} chunks of {r['n_seq_max']}"
                 f"{repeats}:",
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


def _ratio(ratios: dict, name: str) -> str:
    return f"{ratios[name]:.3f}" if name in ratios else "-"


def parallel(r: dict) -> List[str]:
    sizes = [size["summary"] for size in r["sizes"].values()]
    engines, pairs = list(sizes[0]["tokens_per_s"]), list(sizes[0]["ratios"])
    out = table(f"{r['prompt_tokens']}-token prompts, {r['max_tokens']} greedy tokens each (llama-batched-bench: "
                f"`-ntg {r['batched_bench_ntg']}`, the same decode steps), {r['n_threads']} threads, embedded model, "
                f"{r['machine']['cpu']}; generated tokens/s with prefill, medians of {r['repeats']} repeats, engines in "
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
            f"decode steps), {r['n_seq']} sequences, {r['threads']} threads, embedded model, {r['machine']['cpu']}; "
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
                f"{r['n_seq']} sequences in flight in every engine, {r['cores']} cores, {r['machine']['cpu']}; medians "
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
                 f"{r['machine']['cpu']}; one in-process `generate_parallel` call of the same prompts on a context of "
                 f"the same shape: {r['generate_parallel_tokens_per_s']:.1f} tokens/s. Medians of {r['repeats']} "
                 "repeats, engines in turn after a full-width warm-up each; ratio: median of the ratios within a "
                 "repeat:", ["clients", "tokens/s", "ratio to `generate_parallel`", "time to first token, median",
                             "90th percentile"],
                 [[str(row["clients"]), f"{row['tokens_per_s']:.1f}", f"{row['over_generate_parallel']:.2f}",
                   f"{row['ttft_median_s']:.3f} s", f"{row['ttft_p90_s']:.3f} s"] for row in r["rows"]])


def stream_latency(r: dict) -> List[str]:
    return table(f"{r['batch_clients']} clients sending 64 distinct prompts of ~450 tokens (4 greedy tokens each) and "
                 f"one client streaming answers of {r['stream_tokens']} greedy tokens one after another, {r['n_seq']} "
                 f"sequences (slots), {r['threads']} threads, embedded model, {r['machine']['cpu']}; medians of "
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
                f"{r['machine']['cpu']}: coverage of the share of every human code by each 95% interval, and its "
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


def short_texts(r: dict) -> List[str]:
    rows = []
    for name, st in r["sets"].items():
        for layout, m in st["layouts"].items():
            rows.append([name, f"{st['texts']} ({st['mean_characters']:.0f} chars)", layout, f"{m['seconds']:.1f}",
                         f"{m['ratio_to_reference']:.2f}", f"{m['accuracy']:.3f}", f"{m['kappa']:.3f}",
                         f"{m['order_agreement']:.3f}"])
    runs = "; ".join(f"{name} {len(next(iter(st['layouts'].values()))['all_seconds'])}" for name, st in r["sets"].items())
    return table(f"Prompt layouts on human-sorted texts, instruct model `{r['model']}`, {r['machine']['cpu']}: seconds "
                 f"(median of the runs: {runs}), ratio to the reference layout, accuracy and kappa against the human sorting, and order agreement (the same "
                 "label with the labels listed in another order):",
                 ["set", "texts", "layout", "seconds", "x reference", "accuracy", "kappa", "order agreement"], rows)


REPORTS: Dict[str, Callable[[dict], List[str]]] = {
    "validity": validity, "questions": questions, "question-layout": question_layout, "vs-llama-server": vs_llama_server, "two-contexts": two_contexts,
    "determinism": determinism, "stream-latency": stream_latency,
    "cluster-shared-instruction": cluster_shared_instruction, "long-prompts": long_prompts, "parallel": parallel,
    "annotate": annotate, "cluster-vs-local": cluster_vs_local, "server": server, "findings": findings,
    "short-texts": short_texts}


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
