"""The annotation workload: one long instruction, many short documents, a short answer each.

Prints a table and writes JSON (default bench/results/bench_annotate.json). For 64 and
256 documents of about 25 tokens under one instruction of about 450 tokens, 4 greedy
answer tokens, 16 sequences, 2 threads, the embedded model: documents per second with
the prefix cache off and on, in one run; beside them llama.cpp's llama-batched-bench on
the same shapes (unified KV, -kvu): the shared instruction decoded once (-pps) plus, per
16 documents, the suffixes' prefill (-npp 25 -npl 16) and the 4 answer tokens of 16
sequences after the instruction. Then mixed-length prefill: prompts of 8 to 40 tokens
against prompts all of their mean length, one answer token each. Then seconds per 100
documents with choices (4 labels of several tokens; 4 labels of several tokens that share
their starts; 4 labels of one token) against plain 4-token generation on the same prompts,
each engine once per repeat, in turn. (Validity on real labelled text: bench/bench_validity.py.)

    .venv/bin/python bench/bench_annotate.py [--docs 64 256] [--no-batched-bench] [--mixed 512]
        [--choices-docs 64] [--choices-repeats 3]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import newrllama
from newrllama.choices import label_paths
from llama_tools import llama_tool_binary, run_batched_bench

ROOT = Path(__file__).resolve().parents[1]
N_THREADS = 2
N_SEQ = 16
INSTRUCTION_TOKENS = 450
DOC_TOKENS = 25
ANSWER_TOKENS = 4
CODEBOOK = ("Label {k}: stories about {topic}. Use it when the main subject of the story is {topic}, even if other "
            "subjects are mentioned; do not use it for stories that only mention {topic} in passing. ")
TOPICS = ["company earnings", "mergers and acquisitions", "crude oil", "interest rates", "elections", "sport",
          "weather", "science", "health", "courts", "trade", "farming", "shipping", "housing", "labour", "energy"]
SUBJECTS = ["The company", "The minister", "Shares of the group", "The central bank", "Farmers", "The union",
            "The court", "Researchers", "Oil prices", "The airline", "Exporters", "The city council"]
VERBS = ["said on Tuesday that", "reported that", "announced that", "warned that", "confirmed that", "denied that"]
OBJECTS = ["profits rose sharply in the third quarter", "talks on the merger would resume next week",
           "output would be cut by ten percent", "the new rules would take effect in March",
           "prices had fallen to their lowest level in a year", "the deal was worth two billion dollars"]


def exact_tokens(model, text: str, n: int):
    tokens = model.tokenize(text)
    assert len(tokens) >= n, (len(tokens), n)
    return tokens[:n]


def annotation_prompts(model, n_docs: int):
    """Token lists: the same INSTRUCTION_TOKENS-token instruction, then a distinct DOC_TOKENS-token document."""
    rules = "".join(CODEBOOK.format(k=k + 1, topic=t) for k, t in enumerate(TOPICS))
    instruction = exact_tokens(model, "You are a careful news coder. " + rules * 2, INSTRUCTION_TOKENS)
    rng = random.Random(7)
    prompts = []
    for i in range(n_docs):
        doc = (f"\nStory {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}, and "
               f"{rng.choice(SUBJECTS).lower()} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.\nLabel:")
        prompts.append(instruction + model.tokenize(doc, add_special=False)[:DOC_TOKENS])
    return prompts


def run_ours(model, prompts, prefix_cache: bool):
    params = newrllama.SamplingParams(max_tokens=ANSWER_TOKENS)
    n_ctx = N_SEQ * 512
    with newrllama.Context(model, n_ctx=n_ctx, n_seq_max=N_SEQ, n_threads=N_THREADS, prefix_cache=prefix_cache) as ctx:
        t0 = time.perf_counter()
        completions = ctx.generate_parallel(prompts, params)
        elapsed = time.perf_counter() - t0
        stats = ctx.last_stats
    assert stats.n_failed == 0
    return {"seconds": elapsed, "docs_per_s": len(prompts) / elapsed, "prompt_tokens": stats.n_prompt_tokens,
            "cached_tokens": stats.n_cached_tokens, "decoded_prompt_tokens": stats.n_prompt_tokens - stats.n_cached_tokens,
            "texts": [c.text for c in completions]}


def batched_bench_reference():
    """Seconds llama-batched-bench needs for the pieces of the cached workload (unified KV as ours)."""
    binary = llama_tool_binary()
    common = ["-c", str(N_SEQ * 512), "-b", "512", "-ub", "512", "-kvu", "-npl", str(N_SEQ)]
    shared = run_batched_bench(binary, common + ["-npp", str(INSTRUCTION_TOKENS), "-ntg", str(ANSWER_TOKENS), "-pps"],
                               N_THREADS)[0]
    suffix = run_batched_bench(binary, common + ["-npp", str(DOC_TOKENS), "-ntg", "1"], N_THREADS)[0]
    unshared = run_batched_bench(binary, common + ["-npp", str(INSTRUCTION_TOKENS + DOC_TOKENS), "-ntg",
                                                   str(ANSWER_TOKENS)], N_THREADS)[0]
    return {"instruction_once_s": shared["T_PP"], "answers_per_16_s": shared["T_TG"], "suffixes_per_16_s": suffix["T_PP"],
            "unshared_per_16_s": unshared["T"]}


def bench_mixed_lengths(model, n_prompts: int):
    """Prefill of prompts with mixed lengths against prompts all of the mean length, one answer token each."""
    rng = random.Random(11)
    text = " ".join(f"word{k}" for k in range(200))
    base = model.tokenize(text)
    mixed = [base[k % 50:k % 50 + rng.randint(8, 40)] for k in range(n_prompts)]
    mean = round(sum(len(p) for p in mixed) / n_prompts)
    equal = [base[k % 50:k % 50 + mean] for k in range(n_prompts)]
    params = newrllama.SamplingParams(max_tokens=1)
    out = {}
    for name, prompts in (("mixed", mixed), ("equal", equal)):
        with newrllama.Context(model, n_ctx=N_SEQ * 256, n_seq_max=N_SEQ, n_threads=N_THREADS, prefix_cache=False) as ctx:
            t0 = time.perf_counter()
            ctx.generate_parallel(prompts, params)
            out[name + "_s"] = time.perf_counter() - t0
            out[name + "_prompt_tokens"] = ctx.last_stats.n_prompt_tokens
    out["mixed_over_equal"] = out["mixed_s"] / out["equal_s"]
    out["prompts"] = n_prompts
    return out


CHOICE_SETS = {"several tokens": ["company earnings", "mergers and acquisitions", "crude oil", "interest rates"],
               "shared starts": ["crude oil prices", "crude oil supply", "company earnings", "company mergers"],
               "one token": ["earnings", "acquisitions", "oil", "rates"]}
REUTERS_INSTRUCTION = ("Classify the news story by its main topic: acquisition (a company buys, sells or merges "
                       "with another) or crude oil (oil prices, production and supply).")


def choice_rows(model, labels) -> int:
    """Output rows a document's labels need: the prompt's last row, then one per token of each label path
    (every label's tokens, after which its end is scored)."""
    tokens = [model.tokenize(" " + label, add_special=False) for label in labels]
    return 1 + sum(len(path.body) for path in label_paths(tokens, model.vocab.answer_ends.plain))


def bench_choices_vs_plain(model, n_docs: int, repeats: int):
    """Seconds per 100 documents: 4 plain greedy tokens, and each label set as choices, same prompts, prefix
    cache on, every engine once per repeat (in turn, so that the machine's drift hits all alike); the
    ratio to plain is the median of the ratios within a repeat. With the output rows each document needs."""
    prompts = annotation_prompts(model, n_docs)
    runs = [("plain", newrllama.SamplingParams(max_tokens=ANSWER_TOKENS), ANSWER_TOKENS)]
    runs += [(name, newrllama.SamplingParams(choices=labels), choice_rows(model, labels))
             for name, labels in CHOICE_SETS.items()]
    seconds = {name: [] for name, _, _ in runs}
    for _ in range(repeats):
        for name, params, _ in runs:
            with newrllama.Context(model, n_ctx=N_SEQ * 512, n_seq_max=N_SEQ, n_threads=N_THREADS) as ctx:
                t0 = time.perf_counter()
                completions = ctx.generate_parallel(prompts, params)
                seconds[name].append(time.perf_counter() - t0)
            assert all(c.finish_reason != "error" for c in completions)
    out = {"docs": n_docs, "repeats": repeats}
    for name, _, rows in runs:
        out[name] = {"s_per_100": 100 * statistics.median(seconds[name]) / n_docs, "rows_per_doc": rows}
        if name != "plain":
            out[name]["over_plain"] = statistics.median(a / b for a, b in zip(seconds[name], seconds["plain"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, nargs="*", default=[64, 256])
    parser.add_argument("--no-batched-bench", action="store_true")
    parser.add_argument("--mixed", type=int, default=512, help="prompts in the mixed-length prefill run (0: skip)")
    parser.add_argument("--choices-docs", type=int, default=64, help="documents in the choices run (0: skip)")
    parser.add_argument("--choices-repeats", type=int, default=3, help="runs of each engine in the choices run")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "bench_annotate.json"))
    args = parser.parse_args()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)

    model = newrllama.Model()
    reference = None if args.no_batched_bench else batched_bench_reference()
    rows = []
    for n in args.docs:
        prompts = annotation_prompts(model, n)
        off, on = run_ours(model, prompts, False), run_ours(model, prompts, True)
        same = sum(a == b for a, b in zip(off.pop("texts"), on.pop("texts")))
        row = {"docs": n, "off": off, "on": on, "speedup": off["seconds"] / on["seconds"], "same_texts": same,
               "prefill_work_ratio": off["decoded_prompt_tokens"] / on["decoded_prompt_tokens"]}
        if reference:
            row["batched_bench_pps_s"] = (reference["instruction_once_s"] + n / N_SEQ *
                                          (reference["suffixes_per_16_s"] + reference["answers_per_16_s"]))
            row["batched_bench_unshared_s"] = n / N_SEQ * reference["unshared_per_16_s"]
            row["on_over_pps"] = on["seconds"] / row["batched_bench_pps_s"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    mixed = bench_mixed_lengths(model, args.mixed) if args.mixed else None
    choices = bench_choices_vs_plain(model, args.choices_docs, args.choices_repeats) if args.choices_docs else None

    print(f"\nAnnotation: {INSTRUCTION_TOKENS}-token instruction + {DOC_TOKENS}-token document, {ANSWER_TOKENS} answer "
          f"tokens, {N_SEQ} sequences, {N_THREADS} threads, embedded model")
    print(f"{'docs':>5} {'cache off s':>12} {'cache on s':>11} {'docs/s off':>11} {'docs/s on':>10} {'speedup':>8} "
          f"{'prefill work':>13} {'bb -pps s':>10} {'on/bb-pps':>10} {'bb unshared s':>14} {'same texts':>11}")
    for r in rows:
        bb = (f"{r['batched_bench_pps_s']:10.2f} {r['on_over_pps']:10.3f} {r['batched_bench_unshared_s']:14.2f}"
              if "on_over_pps" in r else f"{'-':>10} {'-':>10} {'-':>14}")
        print(f"{r['docs']:>5} {r['off']['seconds']:12.2f} {r['on']['seconds']:11.2f} {r['off']['docs_per_s']:11.2f} "
              f"{r['on']['docs_per_s']:10.2f} {r['speedup']:7.2f}x {r['prefill_work_ratio']:12.1f}x {bb} "
              f"{r['same_texts']:>6}/{r['docs']}")
    if reference:
        print("llama-batched-bench pieces (s): " + ", ".join(f"{k} {v:.2f}" for k, v in reference.items()))
    if mixed:
        print(f"Mixed-length prefill, {mixed['prompts']} prompts of 8-40 tokens, 1 answer token, {N_SEQ} sequences: "
              f"{mixed['mixed_s']:.2f} s; all of the mean length: {mixed['equal_s']:.2f} s; "
              f"ratio {mixed['mixed_over_equal']:.2f}")
    if choices:
        print(f"Seconds per 100 documents ({choices['docs']} documents, median of {choices['repeats']}): plain "
              f"{ANSWER_TOKENS}-token generation "
              f"{choices['plain']['s_per_100']:.2f} ({ANSWER_TOKENS} output rows per document)")
        for name, labels in CHOICE_SETS.items():
            c = choices[name]
            print(f"  choices, 4 labels, {name} ({', '.join(labels)}): {c['s_per_100']:.2f} "
                  f"({c['rows_per_doc']} output rows per document), ratio to plain {c['over_plain']:.2f} (target <= 1)")
    Path(args.json).write_text(json.dumps({"rows": rows, "reference": reference, "mixed": mixed, "choices": choices},
                                          indent=2))
    print(f"wrote {args.json}")
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
