"""Same input, same output: the share of identical answers in each case of issue 45's table, and what the
batch-invariant default costs, against batch_invariant=False, prefix_cache=False and the previous code.

Cases (embedded model or --model, 32 prompts "Here is a short story about ...", 32 greedy tokens, n_seq_max=32, 2 threads):
  same call after threads  the call again on a context where 4 threads had each called 8 of the prompts
  threads vs one call      those 4 threads' answers against the one call of 32
  fresh vs warmed          the call on a context that first ran another call, against a fresh context
  alone vs in the batch    8 of the prompts each alone on a context of its own
  seeded after other work  8 prompts at temperature 0.9, seed 7, again after another call
on a build that offloads to a GPU, the default with 9 of the model's layers and with none offloaded,
and annotate() on the instruct model (--instruct; the first sentence of each of the 70 Reuters stories of r-cran-tm,
8 labels, debias="none"): the same call after another call on the context, and on a fresh context, its
probabilities compared bit for bit. A case counts texts, token ids and probabilities: all must be equal.

Each variant runs in a process of its own (llama.cpp reads its kernel settings once per process), the
variants in turn (bench/in_turn.py); the previous code is a checkout whose shim is built in place:

    git worktree add /tmp/prev 5df0144 && (cd /tmp/prev && .venv/bin/python setup.py build_ext --inplace)
    .venv/bin/python bench/bench_determinism.py [--repeats 2] [--previous /tmp/prev] [--variants NAME ...]
        [--model qwen2.5-coder-1.5b] [--instruct qwen2.5-coder-1.5b] [--prompts 8] [--texts 16]
(--prompts and --texts take the first of the prompts and sentences, for a slow device such as lavapipe.)
Writes bench/results/determinism-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

from bench_models import add_model_argument, model_label, model_path  # noqa: E402

SUBJECTS = ["a lighthouse keeper", "a lost dog", "the last train", "a quiet village", "an old clock", "a young chef",
            "a broken bridge", "the winter sea", "a paper kite", "a stubborn goat", "the night market",
            "a silver key", "a lonely robot", "the red door", "a summer storm", "a forgotten letter", "a brave mouse",
            "the empty stadium", "a street musician", "a desert well", "the new teacher", "a runaway balloon",
            "an island doctor", "the tallest tree", "a ghost ship", "a tired farmer", "the glass tower",
            "a midnight bakery", "a clever crow", "the frozen lake", "a travelling circus", "an old map"]
PROMPTS = [f"Here is a short story about {s}:" for s in SUBJECTS]
OTHER = [f"A recipe for {s} soup:" for s in ("tomato", "onion", "pumpkin", "lentil", "fish", "bean", "pea", "corn")]
LABELS = ["acquisition", "crude oil", "earnings", "trade", "interest rates", "currency", "grain", "shipping"]
VARIANTS = {"batch-invariant (default)": {}, "batch_invariant=False": {"batch_invariant": False},
            "prefix_cache=False": {"prefix_cache": False}, "previous code (default)": "previous",
            # On a build that offloads (every layer by default): half of gemma-3-270m's 18 layers, then none.
            "9 layers offloaded": {"n_gpu_layers": 9}, "no layer offloaded": {"n_gpu_layers": 0}}
OFFLOAD_VARIANTS = ("9 layers offloaded", "no layer offloaded")


def first_sentences() -> list:
    from reuters import reuters_stories
    return [text.replace("\n", " ").split(". ")[0][:300] for text, _ in reuters_stories()]


def seconds_keys(prompts: int, texts: int) -> tuple:
    return f"generation, {prompts} prompts seconds", f"annotate, {texts} texts seconds"


def worker(options: dict, model_path: str, instruct_path: str, n_prompts: int, n_texts: int) -> dict:
    import newrllama
    from helpers.callers import call_from_threads

    options = dict(options)
    offload = {"n_gpu_layers": options.pop("n_gpu_layers")} if "n_gpu_layers" in options else {}

    prompts, few = PROMPTS[:n_prompts], min(8, n_prompts)
    generation_key, annotate_key = seconds_keys(n_prompts, n_texts)

    def ctx_of(model, **kw):
        return newrllama.Context(model, **{"n_ctx": 16384, "n_seq_max": n_prompts, "n_threads": 2, **options, **kw})

    def seen(completions):
        return [(c.text, list(c.token_ids)) for c in completions]

    def same(a, b) -> list:
        return [sum(x == y for x, y in zip(a, b)), len(b)]

    greedy = newrllama.SamplingParams(max_tokens=32)
    seeded = newrllama.SamplingParams(max_tokens=32, temperature=0.9, seed=7)
    cases, seconds = {}, {}
    with newrllama.Model(model_path, **offload) as model:
        offloaded = {"n_gpu_layers": model.n_gpu_layers, "backend": model.backend}
        with ctx_of(model) as ctx:
            ctx.generate_parallel(OTHER, newrllama.SamplingParams(max_tokens=2))  # warm-up (not the prompts)
            t0 = time.perf_counter()
            ref = seen(ctx.generate_parallel(prompts, greedy))
            seconds[generation_key] = time.perf_counter() - t0
        with ctx_of(model) as ctx:
            merged = call_from_threads(lambda p: seen(ctx.generate_parallel(p, greedy)), prompts, 4)
            cases["threads vs one call"] = same(merged, ref)
            cases["same call after threads"] = same(seen(ctx.generate_parallel(prompts, greedy)), ref)
            first = seen(ctx.generate_parallel(prompts[:few], seeded))
            ctx.generate_parallel(OTHER, greedy)
            cases["seeded after other work"] = same(seen(ctx.generate_parallel(prompts[:few], seeded)), first)
        with ctx_of(model) as ctx:
            ctx.generate_parallel(OTHER, greedy)
            cases["fresh vs warmed"] = same(seen(ctx.generate_parallel(prompts, greedy)), ref)
        alone = []
        for p in prompts[:few]:
            with ctx_of(model, n_ctx=2048, n_seq_max=1) as ctx:
                alone += seen([ctx.generate(p, greedy)])
        cases["alone vs in the batch"] = same(alone, ref[:few])
    texts = first_sentences()[:n_texts]
    with newrllama.Model(instruct_path, **offload) as instruct:
        def annotate(ctx):
            return [(a.label, a.probs) for a in newrllama.annotate(texts, LABELS, "Give the topic of the news story.",
                                                                    debias="none", context=ctx)]
        with ctx_of(instruct, n_seq_max=16, n_ctx=8192) as ctx:
            annotate(ctx)  # warm-up: the same work, so that the timed call meets what a rerun meets
            ctx.generate_parallel(OTHER, greedy)
            t0 = time.perf_counter()
            again = annotate(ctx)
            seconds[annotate_key] = time.perf_counter() - t0
        with ctx_of(instruct, n_seq_max=16, n_ctx=8192) as ctx:
            fresh = annotate(ctx)
        cases["annotate after other work vs fresh context"] = same(again, fresh)
        cases["annotate: labels equal, after other work vs fresh"] = same([a[0] for a in again], [a[0] for a in fresh])
        cases["annotate: largest probability gap"] = max(abs(a[1][k] - b[1][k]) for a, b in zip(again, fresh)
                                                         for k in a[1])
    return {"cases": cases, "offload": offloaded, **seconds}


def run_variant(name: str, previous: str, model_path: str, instruct_path: str, n_prompts: int, n_texts: int) -> dict:
    options = VARIANTS[name]
    env = dict(os.environ)
    if options == "previous":
        env["PYTHONPATH"] = str(Path(previous) / "python_core")
        options = {}
    done = subprocess.run([sys.executable, __file__, "--worker",
                           json.dumps([options, model_path, instruct_path, n_prompts, n_texts])],
                          env=env, check=True,
                          capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = result[seconds_keys(n_prompts, n_texts)[0]]
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--previous", default="")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--worker", default=None)
    ap.add_argument("--instruct", default="qwen2.5-coder-0.5b", help="the model annotate() runs on (as --model)")
    ap.add_argument("--prompts", type=int, default=len(PROMPTS), choices=range(1, len(PROMPTS) + 1), metavar="N",
                    help="fewer prompts for a slow device (the cases keep their shape: 8 of them alone, 4 threads)")
    ap.add_argument("--texts", type=int, default=70, metavar="N", help="fewer Reuters sentences for annotate()")
    add_model_argument(ap)
    args = ap.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(*json.loads(args.worker))))
        return
    from bench_results import write_results
    path, instruct_path = model_path(args.model), model_path(args.instruct)
    labels = {"model": model_label(path), "instruct": model_label(instruct_path)}
    from in_turn import paired_median, run_in_turn
    import newrllama
    offloads = newrllama.system_info().gpu_offload
    names = [n for n in args.variants if (VARIANTS[n] != "previous" or args.previous)
             and (n not in OFFLOAD_VARIANTS or offloads)]
    raw = run_in_turn({n: (lambda _r, n=n: run_variant(n, args.previous, path, instruct_path, args.prompts,
                                                       args.texts)) for n in names}, args.repeats)
    base = names[0]
    ratios = {n: {k: paired_median(raw, lambda runs, n=n, k=k: runs[n][k] / runs[base][k])
                  for k in seconds_keys(args.prompts, args.texts)} for n in names[1:]}
    write_results("determinism", {**labels, "prompts": args.prompts, "texts": args.texts, "previous": args.previous and subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=args.previous, capture_output=True, text=True).stdout.strip(),
        "time_against_default": ratios, "raw": raw})
    for n in names:
        print(n, json.dumps(raw[-1]["runs"][n]["cases"]))
    print(json.dumps(ratios, indent=1))


if __name__ == "__main__":
    main()
