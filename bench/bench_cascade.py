"""A cascade from a small instruct model to a larger one: how close to the larger model, at what share of its time,
and do estimates from its labels keep their coverage?

Two human-sorted sets no cure or rule here was tuned on, labelled with annotate()'s defaults: held-back Debian
package descriptions (six archive sections, 40 each) and quotations of Debian's fortunes (six files, 40 each),
both drawn with --seed. On each set, in one process, both models loaded and warmed up on other texts:
  - the small model alone and the large model alone (Cohen's kappa against the human sorting, seconds);
  - annotate(..., cascade=Cascade(large, share=s)) for each --shares s: kappa, seconds (the small model's run and
    the large model's run on the texts sent on), and the share of the large model's time it took;
  - coverage of prevalence() (PPI++) with the cascade's labels at the middle share: --draws random samples of
    --coded coded texts, each label's 95% interval against its share among the set's texts (the finite-population
    default), counted over labels and draws;
  - the share choose_cascade_share() picks from --draws random samples of --coded coded texts (the large model's
    labels of the coded texts only), and the cascade at that share against the large model alone on the texts not
    coded (its time estimated as the small model's plus the share of the large model's).
The target: a share within 0.02 kappa of the large model alone at no more than 0.7 of its time on at least one
set, and coverage of at least 0.9.

    .venv/bin/python bench/bench_cascade.py [--shares 0.2 0.3 0.4] [--draws 200] [--coded 40] [--seed 53]
        [--small PATH] [--large PATH]
Writes bench/results/cascade-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_short_texts import INSTRUCTIONS, fortunes, packages  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402
from newrllama.labels.cascade import least_sure  # noqa: E402

HELD_BACK_SECTIONS = ("electronics", "fonts", "hamradio", "kernel", "video", "web")
QUOTATION_FILES = ("computers", "food", "law", "love", "politics", "sports")
WARM_UP = ["A text to warm up the model.", "Another short text."]


def timed(work) -> Tuple[list, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", newrllama.AnnotationWarning)
        out = work()
    return out, time.perf_counter() - t0


def kappa(annotations: List, truth: List[str]) -> float:
    return newrllama.validate([a.label for a in annotations], truth).kappa


def coverage(annotations: List, truth: List[str], labels: List[str], draws: int, n_coded: int, seed: int) -> dict:
    rng = random.Random(seed)
    true_share = {label: truth.count(label) / len(truth) for label in labels}
    covered = total = 0
    widths: List[float] = []
    for _ in range(draws):
        coded = set(rng.sample(range(len(truth)), n_coded))
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", newrllama.CodingSampleWarning)
            result = newrllama.prevalence(annotations, codes)
        for s in result.shares:
            covered += s.lower <= true_share[s.label] <= s.upper
            total += 1
            widths.append(s.upper - s.lower)
    return {"draws": draws, "coded": n_coded, "coverage": covered / total,
            "median_width": sorted(widths)[len(widths) // 2]}


def share_choice(small: List, large: List, truth: List[str], draws: int, n_coded: int, seed: int,
                 small_time: float) -> dict:
    """choose_cascade_share() on random coded samples: the share it picks, and the cascade at that share against the
    large model alone on the texts not coded (each text's labels are its model's alone, as the cascade's are)."""
    rng = random.Random(seed + 1)
    chosen, differences = [], []
    for _ in range(draws):
        coded = sorted(rng.sample(range(len(truth)), n_coded))
        codes = [truth[i] if i in set(coded) else None for i in range(len(truth))]
        share = newrllama.choose_cascade_share(small, codes, [large[i] for i in coded]).share
        sent = set(least_sure(small, share, None))
        rest = [i for i in range(len(truth)) if codes[i] is None]
        cascade = [(large if i in sent else small)[i] for i in rest]
        differences.append(kappa(cascade, [truth[i] for i in rest]) - kappa([large[i] for i in rest],
                                                                                [truth[i] for i in rest]))
        chosen.append(share)
    median_share = statistics.median(chosen)
    return {"draws": draws, "coded": n_coded, "shares": chosen, "median_share": median_share,
            "median_kappa_difference": statistics.median(differences),
            "within_002": sum(d >= -0.02 for d in differences) / draws,
            "estimated_time_of_large": small_time + median_share}


def run_set(small, large, name: str, items: List[Tuple[str, str]], instruction: str, shares: List[float],
            draws: int, n_coded: int, seed: int) -> dict:
    texts, truth = [t for t, _ in items], [label for _, label in items]
    labels = sorted(set(truth))

    def label(ctx, **options):
        return timed(lambda: newrllama.annotate(texts, labels, instruction, context=ctx, **options))

    alone_small, t_small = label(small)
    alone_large, t_large = label(large)
    out: Dict[str, dict] = {
        "texts": len(texts), "labels": labels,
        "small": {"kappa": kappa(alone_small, truth), "seconds": t_small},
        "large": {"kappa": kappa(alone_large, truth), "seconds": t_large}, "cascade": {}}
    print(f"{name}: small kappa {out['small']['kappa']:.3f} in {t_small:.0f} s, large {out['large']['kappa']:.3f} in "
          f"{t_large:.0f} s", flush=True)
    out["choice"] = share_choice(alone_small, alone_large, truth, draws, n_coded, seed, t_small / t_large)
    print(f"  share chosen from {n_coded} coded texts: median {out['choice']['median_share']}, kappa on the others "
          f"{out['choice']['median_kappa_difference']:+.3f} from the large model's (median of {draws} draws)", flush=True)
    middle = shares[len(shares) // 2]
    for share in shares:
        done, seconds = label(small, cascade=newrllama.Cascade(large, share=share))
        sent = [i for i, a in enumerate(done) if a.provenance.model_sha256 != alone_small[0].provenance.model_sha256]
        # Batch-invariant contexts: each text's labels are those of the model that labelled it, alone.
        same = all((done[i].label, done[i].probs) == ((alone_large if i in set(sent) else alone_small)[i].label,
                                                      (alone_large if i in set(sent) else alone_small)[i].probs)
                   for i in range(len(texts)))
        row = {"kappa": kappa(done, truth), "seconds": seconds, "time_of_large": seconds / t_large,
               "n_second": len(sent), "each_text_as_its_model_alone": same}
        if share == middle:
            row["ppi"] = coverage(done, truth, labels, draws, n_coded, seed)
        out["cascade"][str(share)] = row
        print(f"  share {share}: kappa {row['kappa']:.3f} ({row['kappa'] - out['large']['kappa']:+.3f} from the large "
              f"model) at {row['time_of_large']:.2f} of its time; {len(sent)} texts sent on; labels as alone: {same}"
              + (f"; PPI coverage {row['ppi']['coverage']:.3f} over {draws} draws of {n_coded}" if "ppi" in row
                 else ""), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.2, 0.3, 0.4])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--coded", type=int, default=40)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--small", default=None, help="the first model (default: scripts/fetch_instruct_model.py's)")
    ap.add_argument("--large", default=None, help="the second model (default: the recommended 1.5B instruct model)")
    args = ap.parse_args()
    small_path = args.small or instruct_model_path()
    large_path = args.large or instruct_model_path("qwen2.5-coder-1.5b")
    sets = {"held-back packages": (packages(random.Random(args.seed), HELD_BACK_SECTIONS, 40), INSTRUCTIONS["packages"]),
            "quotations": (fortunes(random.Random(args.seed), QUOTATION_FILES, 40), INSTRUCTIONS["fortunes"])}
    with newrllama.Model(small_path) as sm, newrllama.Model(large_path) as lg, \
            newrllama.Context(sm, n_ctx=16 * 1024, n_seq_max=16, n_threads=2) as small, \
            newrllama.Context(lg, n_ctx=16 * 1024, n_seq_max=16, n_threads=2) as large:
        for ctx in (small, large):
            timed(lambda: newrllama.annotate(WARM_UP, ["a", "b"], "Pick one.", context=ctx))
        results = {name: run_set(small, large, name, items, instruction, args.shares, args.draws, args.coded,
                                 args.seed) for name, (items, instruction) in sets.items()}
    write_results("cascade", {"model": Path(large_path).name, "small_model": Path(small_path).name,
                              "large_model": Path(large_path).name, "sections": list(HELD_BACK_SECTIONS),
                              "quotation_files": list(QUOTATION_FILES), "sets": results})


if __name__ == "__main__":
    main()
