"""Calibration on a few coded texts, with each order cure: does it help, and does it ever hurt?

Three sets the cures and the calibration were never tuned on, each labelled once per cure by the instruct model:
  - held-back one-liners: the one-line descriptions of Debian packages in six archive sections that no earlier
    benchmark used (`apt-cache dumpavail`), 40 per section (--seed);
  - quotations: one- and two-line quotations of Debian's fortunes in six files (the topics), 40 per file (--seed),
    as in the set where calibrating the default's one-order labels fell well short of two orders;
  - the 70 Reuters stories of r-cran-tm (2 labels), cut at 1500 characters.
For each cure (annotate()'s default "auto", which is "contextual" on the one-liners and "reverse" on the stories
uncalibrated, and "reverse" on both when the labels are calibrated: its calibrated figures come from labels annotate()
scored with calibration="pending", which annotate(..., calibration=codes) gives in one call; "auto, one order", the calibrated figures from the uncalibrated default's labels,
as "auto" calibrated before it took two orders; "reverse"; and "none", one scoring in the labels' sorted order: a
fit's offsets can take out any constant correction such as contextual's, so calibrating "none" shows what one order's
scores hold), --draws draws of --coded coded
texts (short texts) or 20 (Reuters): calibrate() on the coded ones and score the others, Cohen's kappa against the
human sorting, uncalibrated, calibrated as calibrate() does by default (criterion "kappa": a fit applied only where
it gives the held-out coded texts better labels), and as it does with criterion "log-loss" (a fit applied where it
predicts their probabilities better, cross_fit()'s default). Reported: the medians over the draws, how often the
coded texts chose no calibration, and the number of draws in which calibrating lowered kappa (what a second order
costs: bench/bench_short_texts.py).

    .venv/bin/python bench/bench_calibration.py [--draws 60] [--coded 30] [--seed 53] [--model PATH]
        [--cures auto "auto, one order" reverse none] [--sets packages quotations reuters]
Writes bench/results/calibration-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from bench_short_texts import INSTRUCTIONS, fortunes, packages, reuters  # noqa: E402
from fetch_instruct_model import instruct_model_path  # noqa: E402

HELD_BACK_SECTIONS = ("electronics", "fonts", "hamradio", "kernel", "video", "web")
QUOTATION_FILES = ("computers", "food", "law", "love", "politics", "sports")
SETS = ("packages", "quotations", "reuters")
CURES = ("auto", "auto, one order", "reverse", "none")


def draws_of(annotations: List, to_calibrate: List, truth: List[str], draws: int, n_coded: int, seed: int) -> dict:
    """Kappas over the draws: uncalibrated from ``annotations``, calibrated from ``to_calibrate`` (the labels scored
    for calibration), a fit on the coded ones applied to the others."""
    rng = random.Random(seed)
    kappas: Dict[str, List[float]] = {"uncalibrated": [], "calibrated": [], "log-loss": []}
    chose_none = {"calibrated": 0, "log-loss": 0}
    first_coded: List[int] = []
    for _ in range(draws):
        coded = sorted(rng.sample(range(len(truth)), n_coded))
        first_coded = first_coded or coded
        rest = [i for i in range(len(truth)) if i not in set(coded)]
        fits = {rule: newrllama.calibrate([to_calibrate[i] for i in coded], [truth[i] for i in coded],
                                          criterion=criterion)
                for rule, criterion in (("calibrated", "kappa"), ("log-loss", "log-loss"))}
        for rule, cal in fits.items():
            chose_none[rule] += not cal.calibrated
        scored = {"uncalibrated": [annotations[i] for i in rest],
                  **{k: cal.apply([to_calibrate[i] for i in rest]) for k, cal in fits.items()}}
        for k, done in scored.items():
            kappas[k].append(newrllama.validate([a.label for a in done], [truth[i] for i in rest]).kappa)
    return {"draws": draws, "coded": n_coded, "first_coded": first_coded,
            "median_kappa": {k: statistics.median(v) for k, v in kappas.items()},
            "kappas": kappas, "chose_no_calibration": chose_none,
            "draws_lowered": {k: sum(c < u - 1e-12 for c, u in zip(kappas[k], kappas["uncalibrated"]))
                              for k in ("calibrated", "log-loss")}}


def natural_flow(ctx, texts: List[str], labels: List[str], instruction: str, truth: List[str], pending: List,
                 result: dict) -> dict:
    """The first draw's coded texts given to annotate() as the calibration, in one call: its labels against those
    of calibrate() on the texts scored with calibration="pending", applied to them, and its kappa on the others."""
    coded = set(result["first_coded"])
    codes = [t if i in coded else None for i, t in enumerate(truth)]
    t0 = time.perf_counter()
    done = newrllama.annotate(texts, labels, instruction, context=ctx, calibration=codes)
    seconds = time.perf_counter() - t0
    expected = newrllama.calibrate(pending, codes).apply(pending)
    rest = [i for i in range(len(truth)) if i not in coded]
    kappa = newrllama.validate([done[i].label for i in rest], [truth[i] for i in rest]).kappa
    same = [(a.label, a.probs) for a in done] == [(a.label, a.probs) for a in expected]
    print(f"  annotate(..., calibration=codes), first draw: kappa {kappa:.3f} (calibrated as pending: "
          f"{result['kappas']['calibrated'][0]:.3f}); same labels and probabilities: {same}; {seconds:.0f} s",
          flush=True)
    return {"kappa": kappa, "pending_calibrated_kappa": result["kappas"]["calibrated"][0],
            "same_as_pending_calibrated": same, "seconds": seconds}


def run_set(ctx, name: str, items: List[Tuple[str, str]], instruction: str, cures: List[str], draws: int,
            n_coded: int, seed: int) -> dict:
    texts, truth = [t for t, _ in items], [label for _, label in items]
    labels = sorted(set(truth))
    out = {"texts": len(texts), "labels": labels, "cures": {}}
    labelled: Dict[Tuple[str, bool], List] = {}

    def labels_of(debias: str, for_calibration: bool) -> List:
        """The set's labels by one cure, scored for calibration or not (once each)."""
        if (debias, for_calibration) not in labelled:
            labelled[debias, for_calibration] = newrllama.annotate(
                texts, labels, instruction, debias=debias, context=ctx,
                calibration="pending" if for_calibration else None)
        return labelled[debias, for_calibration]

    for cure in cures:
        debias = cure.split(",")[0]
        annotations, to_calibrate = labels_of(debias, False), labels_of(debias, cure == "auto")
        v = newrllama.validate([a.label for a in annotations], truth)
        result = {"kappa_all_uncalibrated": v.kappa, **draws_of(annotations, to_calibrate, truth, draws, n_coded, seed)}
        if cure == "auto":
            result["natural_flow"] = natural_flow(ctx, texts, labels, instruction, truth, to_calibrate, result)
        out["cures"][cure] = result
        m = result["median_kappa"]
        print(f"{name} {cure}: median kappa uncalibrated {m['uncalibrated']:.3f}, calibrated {m['calibrated']:.3f}, "
              f"by log-loss {m['log-loss']:.3f}; no calibration chosen {result['chose_no_calibration']} of {draws}; "
              f"draws lowered {result['draws_lowered']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=60)
    ap.add_argument("--coded", type=int, default=30)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--cures", nargs="+", default=list(CURES), choices=CURES)
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--model", default=None, help="a GGUF instruct model (default: scripts/fetch_instruct_model.py's)")
    args = ap.parse_args()
    path = args.model or instruct_model_path()
    chosen = {  # name -> (texts, instruction, coded texts per draw)
        "packages": ("held-back packages", lambda: packages(random.Random(args.seed), HELD_BACK_SECTIONS, 40),
                     INSTRUCTIONS["packages"], args.coded),
        "quotations": ("quotations", lambda: fortunes(random.Random(args.seed), QUOTATION_FILES, 40),
                       INSTRUCTIONS["fortunes"], args.coded),
        "reuters": ("reuters", reuters, INSTRUCTIONS["reuters"], 20)}
    sets = {}
    with newrllama.Model(path) as model, newrllama.Context(model, n_ctx=16 * 1024, n_seq_max=16, n_threads=2) as ctx:
        for key in args.sets:
            name, items, instruction, n_coded = chosen[key]
            sets[name] = run_set(ctx, name, items(), instruction, args.cures, args.draws, n_coded, args.seed)
    write_results("calibration", {"model": Path(path).name, "sections": list(HELD_BACK_SECTIONS),
                                  "quotation_files": list(QUOTATION_FILES), "sets": sets})


if __name__ == "__main__":
    main()
