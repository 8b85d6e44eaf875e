"""Are codes of texts chosen by the model's doubt noticed, and random samples let through, on real labels?

Two human-sorted sets, labelled once each by the instruct model with annotate()'s defaults: held-back Debian
package descriptions (six archive sections no other benchmark tunes on, 40 each) and WordNet noun definitions
(eight lexicographer files, 30 each). Per draw (--draws), a random --texts of the set's texts stand for a
corpus; the coded texts are either least_confident()'s --coded of them, or a simple random sample of as many,
their codes the human ones, given to prevalence() as a bare truth vector. Reported per set: how often the check
warned (CodingSampleWarning) for each kind of coded sample, and for least_confident() at 5 and 10 coded texts.
The targets: at least 99% of least-confident samples warned, under 1% of random ones (the stated false-alarm
rate is 1 in 1,000).

    .venv/bin/python bench/bench_picked_codes.py [--draws 200] [--texts 200] [--coded 30] [--seed 71] [--model PATH]
Writes bench/results/picked-codes-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import random
import sys
import warnings
from pathlib import Path
from typing import List, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_short_texts import INSTRUCTIONS, packages, wordnet  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402

HELD_BACK_SECTIONS = ("electronics", "fonts", "hamradio", "kernel", "video", "web")
WORDNET_PER_FILE = 30


def warned(annotations: Sequence, truth: Sequence[str], coded: Sequence[int]) -> bool:
    bare = [truth[i] if i in set(coded) else None for i in range(len(truth))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", newrllama.CodingSampleWarning)
        newrllama.prevalence(annotations, bare)
    return any(issubclass(w.category, newrllama.CodingSampleWarning) for w in caught)


def run_set(annotations: List, truth: List[str], draws: int, n_texts: int, n_coded: int, seed: int) -> dict:
    rng = random.Random(seed)
    counts = {f"least confident {n_coded}": 0, "least confident 10": 0, "least confident 5": 0,
              f"random {n_coded}": 0}
    for _ in range(draws):
        corpus = rng.sample(range(len(truth)), n_texts)
        ann, codes = [annotations[i] for i in corpus], [truth[i] for i in corpus]
        for n in (n_coded, 10, 5):
            counts[f"least confident {n}"] += warned(ann, codes, newrllama.least_confident(ann, n))
        counts[f"random {n_coded}"] += warned(ann, codes, rng.sample(range(n_texts), n_coded))
    v = newrllama.validate([a.label for a in annotations], truth)
    return {"n_texts_in_set": len(truth), "kappa": v.kappa, "warned": counts,
            "warned_share": {k: c / draws for k, c in counts.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--coded", type=int, default=30)
    ap.add_argument("--seed", type=int, default=71)
    ap.add_argument("--model", default=None, help="a GGUF instruct model (default: scripts/fetch_instruct_model.py's)")
    args = ap.parse_args()
    path = args.model or instruct_model_path()
    sets = {"held-back packages": (packages(random.Random(args.seed), HELD_BACK_SECTIONS, 40), INSTRUCTIONS["packages"]),
            "wordnet": (wordnet(random.Random(args.seed), WORDNET_PER_FILE), INSTRUCTIONS["wordnet"])}
    out = {}
    with newrllama.Model(path) as model, newrllama.Context(model, n_ctx=16 * 1024, n_seq_max=16, n_threads=2) as ctx:
        for name, (items, instruction) in sets.items():
            texts, truth = [t for t, _ in items], [label for _, label in items]
            annotations = newrllama.annotate(texts, sorted(set(truth)), instruction, context=ctx)
            out[name] = run_set(annotations, truth, args.draws, args.texts, args.coded, args.seed)
            print(name, out[name]["warned_share"], flush=True)
    write_results("picked-codes", {"model": Path(path).name, "draws": args.draws, "texts": args.texts,
                                   "coded": args.coded, "seed": args.seed, "sets": out})


if __name__ == "__main__":
    main()
