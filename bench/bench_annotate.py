"""The annotation workload: one long instruction, many short documents, a short answer each.

For 64 and 256 documents of 25 tokens under one instruction of 450 tokens, 4 greedy answer
tokens, 16 sequences, 2 threads, the embedded model: seconds and documents per second with the
prefix cache off and on, the prompt tokens each decoded (the shared start, decoded once, is
charged to the first prompt that copies it: the instruction's decodes are reported beside it),
and llama.cpp's llama-batched-bench on the same work:
  - with the cache on, against the pieces of the same work (-kvu, one KV stream as ours): the
    shared start decoded once, and per 16 documents 3 decode steps of 16 sequences after it
    (-npp <shared> -pps -npl 16), plus the 16 suffixes' prefill (-npp <suffix> -npl 16), which
    runs with no shared start in the cache, so its attention reads fewer cells than ours: the
    sum is a little less work than ours;
  - with the cache off (a KV stream per sequence), against the prompts decoded in full, in
    the same layout (-npp 475 -npl 16), per 16 documents.
Equal work: our 4 tokens take the prefill and 3 decode steps (the last token is sampled, never
decoded), and every step of llama-batched-bench decodes, so it runs -ntg 3.
Then mixed-length prefill without the cache (a KV stream per sequence): prompts of 8 to 40
tokens against prompts all of their mean length, one answer token each. Then seconds per 100 documents with choices (4 labels of several tokens;
4 labels of several tokens that share their starts; 4 labels of one token) against plain 4-token
generation on the same prompts. (Validity on real labelled text: bench/bench_validity.py.)
Every comparison runs its engines in turn within each repeat, the first rotating between repeats,
each after a warm-up at full width in the context or process it is timed in (ours: 16 prompts of
the same shape under another instruction, which the cache cannot serve to the timed call;
llama-batched-bench: its shape with one decode step first, dropped); ratios are medians of the
ratios within a repeat (a speed ratio above 1: ours is faster).

    .venv/bin/python bench/bench_annotate.py [--docs 64 256] [--repeats 2] [--no-batched-bench] [--mixed 512]
        [--choices-docs 64] [--choices-repeats 3]
Writes bench/results/annotate-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Dict, List, Optional, Sequence

import newrllama
from bench_results import write_results
from in_turn import Run, median_of, paired_median, run_in_turn, speed_ratio
from llama_tools import llama_tool_binary, run_batched_bench_warm
from newrllama.engine.step.choices import label_paths

N_THREADS = 2
N_SEQ = 16
INSTRUCTION_TOKENS = 450
DOC_TOKENS = 25
ANSWER_TOKENS = 4
WARM_TOKENS = 2  # the prefill, then one decode step of every sequence
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
OFF, ON = "newrllama, prefix cache off", "newrllama, prefix cache on"
BB_PIECES, BB_UNSHARED = "llama-batched-bench -kvu pieces (-pps)", "llama-batched-bench, prompts in full"


def exact_tokens(model, text: str, n: int):
    tokens = model.tokenize(text)
    assert len(tokens) >= n, (len(tokens), n)
    return tokens[:n]


def annotation_prompts(model, n_docs: int, coder: str = "careful news coder"):
    """Token lists: the same INSTRUCTION_TOKENS-token instruction, then a distinct DOC_TOKENS-token document.
    Another coder makes an instruction that shares no start with this one."""
    rules = "".join(CODEBOOK.format(k=k + 1, topic=t) for k, t in enumerate(TOPICS))
    instruction = exact_tokens(model, f"You are a {coder}. " + rules * 2, INSTRUCTION_TOKENS)
    rng = random.Random(7)
    prompts = []
    for i in range(n_docs):
        doc = (f"\nStory {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}, and "
               f"{rng.choice(SUBJECTS).lower()} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.\nLabel:")
        prompts.append(instruction + model.tokenize(doc, add_special=False)[:DOC_TOKENS])
    return prompts


def warm_up_prompts(model):
    """Full width, the same shape, under an instruction that shares no start with the timed prompts'."""
    return annotation_prompts(model, N_SEQ, coder="careful wire editor")


def prompt_tokens_decoded(done, n_instruction: int) -> Dict[str, float]:
    """The prompt tokens a call decoded (its prompts' tokens less those copied from the cache; a start decoded
    once for several prompts is charged to the first that copies it), and how many times the instruction, the
    first n_instruction tokens of every prompt, was decoded: what was decoded beyond each prompt's own tokens,
    in instructions."""
    n = sum(c.n_prompt_tokens - c.n_cached_tokens for c in done)
    own = sum(c.n_prompt_tokens - n_instruction for c in done)
    return {"prompt_tokens_decoded": n, "instruction_decodes": (n - own) / n_instruction}


def ours(model, prompts, prefix_cache: bool, warm, params: newrllama.SamplingParams, warm_params=None) -> Dict:
    """One timed generate_parallel call on a new context after a warm-up call: its seconds and completions."""
    with newrllama.Context(model, n_ctx=N_SEQ * 512, n_seq_max=N_SEQ, n_threads=N_THREADS,
                           prefix_cache=prefix_cache) as ctx:
        ctx.generate_parallel(warm, warm_params or newrllama.SamplingParams(max_tokens=WARM_TOKENS))
        t0 = time.perf_counter()
        done = ctx.generate_parallel(prompts, params)
        seconds = time.perf_counter() - t0
    failed = [c.error for c in done if c.finish_reason == "error"]
    if failed:
        raise SystemExit(f"{len(failed)} prompts failed, for example: {failed[0]}")
    return {"seconds": seconds, "done": done}


def shared_start(prompts) -> int:
    return len(os.path.commonprefix(prompts))


def bench_docs(model, n: int, binary: Optional[str], repeats: int) -> Dict:
    """Cache off and on, and llama-batched-bench's same work, in turn."""
    prompts, warm = annotation_prompts(model, n), warm_up_prompts(model)
    n_shared = shared_start(prompts)
    n_suffix = len(prompts[0]) - n_shared
    params = newrllama.SamplingParams(max_tokens=ANSWER_TOKENS)
    texts: Dict[str, List[str]] = {}

    def our_engine(cache: bool) -> Run:
        def run(repeat: int) -> Dict:
            out = ours(model, prompts, cache, warm, params)
            done = out.pop("done")
            texts[f"{cache} {repeat}"] = [c.text for c in done]
            return {**out, "docs_per_s": n / out["seconds"], **prompt_tokens_decoded(done, n_shared)}
        return run

    engines: Dict[str, Run] = {OFF: our_engine(False), ON: our_engine(True)}
    if binary:
        common = ["-c", str(N_SEQ * 512), "-b", "512", "-ub", "512", "-npl", str(N_SEQ)]

        def pieces(_repeat: int) -> Dict:
            """The shared start once, then per 16 documents the suffixes' prefill and the answers' steps."""
            shared = run_batched_bench_warm(binary, common + ["-kvu", "-pps", "-npp", str(n_shared)],
                                            ANSWER_TOKENS - 1, N_THREADS)
            suffixes = run_batched_bench_warm(binary, common + ["-kvu", "-npp", str(n_suffix)], 1, N_THREADS)
            seconds = shared["row"]["T_PP"] + n / N_SEQ * (suffixes["row"]["T_PP"] + shared["row"]["T_TG"])
            return {"seconds": seconds, "shared": shared, "suffixes": suffixes}

        def unshared(_repeat: int) -> Dict:
            full = run_batched_bench_warm(binary, common + ["-npp", str(len(prompts[0]))], ANSWER_TOKENS - 1,
                                          N_THREADS)
            return {"seconds": n / N_SEQ * full["seconds"], "per_16": full}
        engines[BB_PIECES], engines[BB_UNSHARED] = pieces, unshared
    raw = run_in_turn(engines, repeats, label=f"{n} documents, ")
    on, off = raw[0]["runs"][ON], raw[0]["runs"][OFF]
    summary = {"docs": n, "shared_start_tokens": n_shared, "suffix_tokens": n_suffix,
               "seconds": {e: median_of(raw, e) for e in engines},
               "docs_per_s": {e: n / median_of(raw, e) for e in engines},
               "speedup_on_over_off": speed_ratio(raw, ON, OFF),
               "prompt_tokens_decoded": {OFF: off["prompt_tokens_decoded"], ON: on["prompt_tokens_decoded"]},
               "instruction_decodes_on": on["instruction_decodes"],
               "prefill_work_off_over_on": off["prompt_tokens_decoded"] / on["prompt_tokens_decoded"],
               "same_texts": min(sum(a == b for a, b in zip(texts[f"False {k}"], texts[f"True {k}"]))
                                 for k in range(repeats))}
    if binary:
        summary["speed_over_batched_bench"] = {ON: speed_ratio(raw, ON, BB_PIECES), OFF: speed_ratio(raw, OFF, BB_UNSHARED)}
    return {"summary": summary, "raw": raw}


def bench_mixed_lengths(model, n_prompts: int, repeats: int) -> Dict:
    """Prefill of prompts with mixed lengths against prompts all of the mean length, one answer token each,
    without the cache."""
    rng = random.Random(11)
    text = " ".join(f"word{k}" for k in range(200))
    base = model.tokenize(text)
    mixed = [base[k % 50:k % 50 + rng.randint(8, 40)] for k in range(n_prompts)]
    mean = round(sum(len(p) for p in mixed) / n_prompts)
    equal = [base[k % 50:k % 50 + mean] for k in range(n_prompts)]
    one = newrllama.SamplingParams(max_tokens=1)

    def engine(prompts) -> Run:
        def run(_repeat: int) -> Dict:
            out = ours(model, prompts, False, prompts[:N_SEQ], one, one)
            return {"seconds": out["seconds"], "prompt_tokens": sum(c.n_prompt_tokens for c in out["done"])}
        return run
    raw = run_in_turn({"mixed": engine(mixed), "equal": engine(equal)}, repeats, label="mixed lengths, ")
    return {"prompts": n_prompts, "mean_tokens": mean, "mixed_s": median_of(raw, "mixed"),
            "equal_s": median_of(raw, "equal"),
            "mixed_over_equal": paired_median(raw, lambda r: r["mixed"]["seconds"] / r["equal"]["seconds"]), "raw": raw}


CHOICE_SETS = {"several tokens": ["company earnings", "mergers and acquisitions", "crude oil", "interest rates"],
               "shared starts": ["crude oil prices", "crude oil supply", "company earnings", "company mergers"],
               "one token": ["earnings", "acquisitions", "oil", "rates"]}


def choice_rows(model, labels: Sequence[str]) -> int:
    """Output rows a document's labels need: the prompt's last row, then one per token of each label path
    (every label's tokens, after which its end is scored)."""
    tokens = [model.tokenize(" " + label, add_special=False) for label in labels]
    return 1 + sum(len(path.body) for path in label_paths(tokens, model.vocab.answer_ends.plain))


def bench_choices_vs_plain(model, n_docs: int, repeats: int) -> Dict:
    """Seconds per 100 documents: 4 plain greedy tokens, and each label set as choices, same prompts, prefix
    cache on; the ratio to plain is the median of the ratios within a repeat. With the output rows each
    document needs."""
    prompts, warm = annotation_prompts(model, n_docs), warm_up_prompts(model)
    runs = {"plain": (newrllama.SamplingParams(max_tokens=ANSWER_TOKENS), ANSWER_TOKENS)}
    runs.update((name, (newrllama.SamplingParams(choices=labels), choice_rows(model, labels)))
                for name, labels in CHOICE_SETS.items())

    def engine(params) -> Run:
        # The warm-up answers the same way: scoring labels runs shapes of its own.
        return lambda _repeat: {"seconds": ours(model, prompts, True, warm, params, params)["seconds"]}
    raw = run_in_turn({name: engine(params) for name, (params, _) in runs.items()}, repeats, label="choices, ")
    out: Dict = {"docs": n_docs, "repeats": repeats, "raw": raw}
    for name, (_, rows) in runs.items():
        out[name] = {"s_per_100": 100 * median_of(raw, name) / n_docs, "rows_per_doc": rows}
        if name != "plain":
            out[name]["over_plain"] = paired_median(raw, lambda r: r[name]["seconds"] / r["plain"]["seconds"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, nargs="*", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=2, help="runs of every engine, in turn (documents, mixed)")
    parser.add_argument("--no-batched-bench", action="store_true")
    parser.add_argument("--mixed", type=int, default=512, help="prompts in the mixed-length prefill run (0: skip)")
    parser.add_argument("--choices-docs", type=int, default=64, help="documents in the choices run (0: skip)")
    parser.add_argument("--choices-repeats", type=int, default=3, help="runs of each engine in the choices run")
    args = parser.parse_args()

    model = newrllama.Model()
    binary = None if args.no_batched_bench else llama_tool_binary()
    docs = [bench_docs(model, n, binary, args.repeats) for n in args.docs]
    mixed = bench_mixed_lengths(model, args.mixed, args.repeats) if args.mixed else None
    choices = bench_choices_vs_plain(model, args.choices_docs, args.choices_repeats) if args.choices_docs else None

    print(f"\nAnnotation: {INSTRUCTION_TOKENS}-token instruction + {DOC_TOKENS}-token document, {ANSWER_TOKENS} answer "
          f"tokens (llama-batched-bench: -ntg {ANSWER_TOKENS - 1}), {N_SEQ} sequences, {N_THREADS} threads, embedded "
          f"model; medians of {args.repeats} repeats")
    for d in docs:
        s = d["summary"]
        print(f"{s['docs']} documents: " + ", ".join(f"{e} {t:.2f} s" for e, t in s["seconds"].items()))
        print(f"    cache on / off speed {s['speedup_on_over_off']:.2f}x; prompt tokens decoded off "
              f"{s['prompt_tokens_decoded'][OFF]}, on {s['prompt_tokens_decoded'][ON]} (the {s['shared_start_tokens']}"
              f"-token shared start decoded {s['instruction_decodes_on']:.2f} times): prefill work "
              f"{s['prefill_work_off_over_on']:.1f}x less; same texts {s['same_texts']}/{s['docs']}")
        for engine, ratio in s.get("speed_over_batched_bench", {}).items():
            print(f"    {engine} / its llama-batched-bench reference (speed): {ratio:.2f}")
    if mixed:
        print(f"Mixed-length prefill, {mixed['prompts']} prompts of 8-40 tokens, 1 answer token, {N_SEQ} sequences: "
              f"{mixed['mixed_s']:.2f} s; all of the mean length: {mixed['equal_s']:.2f} s; "
              f"ratio {mixed['mixed_over_equal']:.2f}")
    if choices:
        print(f"Seconds per 100 documents ({choices['docs']} documents, median of {choices['repeats']}): plain "
              f"{ANSWER_TOKENS}-token generation {choices['plain']['s_per_100']:.2f} ({ANSWER_TOKENS} output rows per "
              "document)")
        for name, labels in CHOICE_SETS.items():
            c = choices[name]
            print(f"  choices, 4 labels, {name} ({', '.join(labels)}): {c['s_per_100']:.2f} "
                  f"({c['rows_per_doc']} output rows per document), ratio to plain {c['over_plain']:.2f} (target <= 1)")
    write_results("annotate", {"n_seq": N_SEQ, "threads": N_THREADS, "instruction_tokens": INSTRUCTION_TOKENS,
                               "doc_tokens": DOC_TOKENS, "answer_tokens": ANSWER_TOKENS,
                               "batched_bench_ntg": ANSWER_TOKENS - 1, "repeats": args.repeats,
                               "batched_bench": binary, "docs": docs, "mixed": mixed, "choices": choices,
                               "choice_sets": CHOICE_SETS})
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
