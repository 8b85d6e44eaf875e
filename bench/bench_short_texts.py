"""Labels for short texts: what each prompt layout costs and how well it labels, on human-sorted one-liners.

Three short-text sets sorted by people, in different domains, all from Debian packages (`apt install fortunes
wordnet-base`; the package lists apt already has): one-line quotations of the `fortunes` package by the file they
were sorted into (8 files), the one-line descriptions of Debian packages by their archive section (8 sections),
and WordNet's noun definitions by the lexicographer file they were sorted into (8 files); 8 labels, 64 texts each
(8 per label, drawn with --seed). The default cure was chosen on the first two; WordNet was added afterwards as a
held-back check. And the 70 Reuters stories of r-cran-tm (2 labels, cut at 1500 characters) for long texts.
Layouts, each run on a fresh context after the same warm-up, in turn within each repeat:
  - "reference": the previous release's layout, kept as the yardstick: the list of labels in the
    instruction (system turn), the text alone in the user turn, one listing order (as given), no cure;
  - "list in instruction, reverse": the same layout scored in the sorted order and its reverse, each
    order's instruction decoded once per call, the label log-probabilities averaged (order-free);
  - "text, then list, reverse": the text in the user turn followed by the list, both orders sharing the
    text (annotate()'s layout for every text before the choice by length);
  - "annotate()": the default (debias="auto"): a text shorter than two lists takes the list-first layout and
    is scored once with contextual calibration, a longer one the text-first layout in both orders;
  - "annotate(debias='reverse')": the previous default: the same layouts, every text in both orders;
  - "annotate(debias='contextual')": each text scored once, in the sorted order, each label's probability
    divided by its mean for content-free texts under the same prompt (contextual calibration), long texts too.
On the Reuters stories (long texts: both layouts are text-first there) the list-first one is left out.
Reported per layout: seconds (median over repeats), ratio to the reference, accuracy and Cohen's kappa
against the human sorting, and order agreement: the share of texts whose label is the same when the user
lists the labels in another (shuffled) order.

    .venv/bin/python bench/bench_short_texts.py [--repeats 2] [--reuters-repeats 1] [--seed 47] [--sets ...]
        [--model NAME] [--layouts ...]
Writes bench/results/short-texts-<date>-<cpu>.json.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import newrllama  # noqa: E402
from bench_results import write_results  # noqa: E402
from fetch_instruct_model import DEFAULT, MODELS, instruct_model_path  # noqa: E402
from reuters import reuters_stories  # noqa: E402

FORTUNE_FILES = ("computers", "food", "law", "love", "medicine", "politics", "science", "sports")
SECTIONS = ("database", "editors", "games", "graphics", "mail", "math", "science", "sound")
# WordNet's lexicographer files: every noun sense sorted by lexicographers into one of them.
LEXICOGRAPHER_FILES = {"05": "animal", "06": "artifact", "08": "body", "12": "feeling", "13": "food",
                       "15": "location", "18": "person", "20": "plant"}
INSTRUCTIONS = {
    "fortunes": "You sort short quotations into the topic they joke about. Decide the topic of the quotation.",
    "packages": "You sort software packages by what they do. Decide the category of the package from its "
                "one-line description.",
    "wordnet": "You sort dictionary definitions by the kind of thing they define. Decide the category of the word "
               "from its definition.",
    "reuters": "You are coding Reuters news stories for a content analysis. Decide the topic of the story.",
}
PER_LABEL = 8
CUT = 1500


def fortunes(rng: random.Random, files: Sequence[str] = FORTUNE_FILES, per_label: int = PER_LABEL
             ) -> List[Tuple[str, str]]:
    """One- and two-line quotations of Debian's fortunes by file, per_label of each."""
    out = []
    for name in files:
        text = Path("/usr/share/games/fortunes", name).read_text(encoding="utf-8", errors="replace")
        lines = [" ".join(q.split()) for q in text.split("\n%\n") if q.count("\n") <= 1 and 25 <= len(q) <= 140]
        out += [(q, name) for q in rng.sample(sorted(set(lines)), per_label)]
    return out


def packages(rng: random.Random, sections: Sequence[str] = SECTIONS, per_label: int = PER_LABEL
             ) -> List[Tuple[str, str]]:
    """Debian packages' one-line descriptions by archive section, per_label of each."""
    dump = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    by_section: Dict[str, set] = {s: set() for s in sections}
    section = None
    for line in dump.splitlines():
        if line.startswith("Section: "):
            section = line.split(": ", 1)[1].split("/")[-1]
        elif line.startswith("Description: ") and section in by_section:
            by_section[section].add(line.split(": ", 1)[1].strip())
    return [(d, s) for s in sections for d in rng.sample(sorted(by_section[s]), per_label)]


def wordnet(rng: random.Random, per_label: int = PER_LABEL) -> List[Tuple[str, str]]:
    """Noun definitions (the gloss without its quoted examples) by lexicographer file, per_label of each."""
    by_file: Dict[str, set] = {f: set() for f in LEXICOGRAPHER_FILES}
    for line in Path("/usr/share/wordnet/data.noun").read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split(" ", 2)
        if len(fields) == 3 and fields[1] in by_file and " | " in line:
            gloss = line.split(" | ", 1)[1].split(";")[0].strip()
            if 25 <= len(gloss) <= 140:
                by_file[fields[1]].add(gloss)
    return [(g, LEXICOGRAPHER_FILES[f]) for f in LEXICOGRAPHER_FILES for g in rng.sample(sorted(by_file[f]), per_label)]


def reuters() -> List[Tuple[str, str]]:
    return [(t[:CUT], label) for t, label in reuters_stories()]


def listed(instruction: str, labels: Sequence[str]) -> str:
    return f"{instruction}\nAnswer with exactly one of these labels: {', '.join(labels)}."


def scored(ctx, texts, labels: Sequence[str], orders: List[Sequence[str]], turns: Callable) -> List[str]:
    """Each text scored under each listing order (turns(order, text): its system and user turns), the labels'
    log-probabilities averaged over the orders."""
    # A text's prompts in a row, as annotate() sends them: what they share is decoded once while cached.
    prompts = [ctx.model.apply_chat_template([{"role": role, "content": content}
                                              for role, content in zip(("system", "user"), turns(order, t))])
               for t in texts for order in orders]
    params = [newrllama.SamplingParams(choices=list(order)) for _ in texts for order in orders]
    done = ctx.generate_parallel(prompts, params)
    out = []
    for i in range(len(texts)):
        score = {label: 0.0 for label in labels}
        for k in range(len(orders)):
            for label, p in done[i * len(orders) + k].choice_probs.items():
                score[label] += math.log(max(p, 1e-300)) / len(orders)
        out.append(max(score, key=score.get))
    return out


def annotated(**options) -> Callable:
    """A layout that is annotate() itself, with ``options``: the labels a call gives for the texts."""
    return lambda ctx, texts, given, ins: [a.label for a in newrllama.annotate(texts, list(given), ins, context=ctx,
                                                                               **options)]


def layouts(labels: Sequence[str], long_texts: bool) -> Dict[str, Callable]:
    ordered = sorted(labels, key=lambda label: (label.casefold(), label))
    both = [ordered, ordered[::-1]]

    def list_first(ins):
        return lambda order, text: (listed(ins, order), text)

    def text_first(ins):
        return lambda order, text: (ins, f"{text}\n\nAnswer with exactly one of these labels: {', '.join(order)}.")

    out = {
        "reference": lambda ctx, texts, given, ins: scored(ctx, texts, labels, [given], list_first(ins)),
        "list in instruction, reverse": lambda ctx, texts, given, ins: scored(ctx, texts, labels, both,
                                                                            list_first(ins)),
        "text, then list, reverse": lambda ctx, texts, given, ins: scored(ctx, texts, labels, both, text_first(ins)),
        "annotate()": annotated(),
        "annotate(debias='reverse')": annotated(debias="reverse"),
        "annotate(debias='contextual')": annotated(debias="contextual"),
    }
    if long_texts:
        del out["list in instruction, reverse"]
    return out


def fresh_context(model, texts):
    ctx = newrllama.Context(model, n_ctx=16 * 1024 if max(len(t) for t in texts) > 400 else 16 * 256,
                            n_seq_max=16, n_threads=2)
    # The same warm-up for every layout: 16 prompts under another instruction, at full width.
    ctx.generate_parallel([f"Warm-up text number {i}." for i in range(16)], newrllama.SamplingParams(max_tokens=2))
    return ctx


def run_set(model, name: str, items: List[Tuple[str, str]], repeats: int, seed: int,
            chosen: Sequence[str] = ()) -> dict:
    texts, truth = [t for t, _ in items], [label for _, label in items]
    labels = sorted(set(truth))
    shuffled = random.Random(seed).sample(labels, len(labels))
    runs = {k: run for k, run in layouts(labels, name == "reuters").items() if not chosen or k in chosen or k == "reference"}
    seconds: Dict[str, List[float]] = {k: [] for k in runs}
    results: Dict[str, dict] = {}
    for r in range(repeats):
        names = list(runs)[r % len(runs):] + list(runs)[:r % len(runs)]  # the first rotates
        for k in names:
            with fresh_context(model, texts) as ctx:
                t0 = time.perf_counter()
                got = runs[k](ctx, texts, labels, INSTRUCTIONS[name])
                seconds[k].append(time.perf_counter() - t0)
            if r == 0:
                with fresh_context(model, texts) as ctx:
                    other = runs[k](ctx, texts, shuffled, INSTRUCTIONS[name])
                v = newrllama.validate(got, truth)
                results[k] = {"accuracy": v.accuracy, "kappa": v.kappa,
                              "order_agreement": sum(a == b for a, b in zip(got, other)) / len(texts)}
            print(f"{name} {k}: {seconds[k][-1]:.1f} s", flush=True)
    reference = statistics.median(seconds["reference"])
    for k in runs:
        results[k]["seconds"] = statistics.median(seconds[k])
        results[k]["all_seconds"] = seconds[k]
        results[k]["ratio_to_reference"] = results[k]["seconds"] / reference
    return {"texts": len(texts), "labels": labels, "shuffled_order": shuffled,
            "mean_characters": statistics.mean(len(t) for t in texts), "layouts": results}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--reuters-repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=47)
    ap.add_argument("--sets", nargs="+", default=["fortunes", "packages", "wordnet", "reuters"])
    ap.add_argument("--model", default=DEFAULT, choices=sorted(MODELS), help="the instruct model")
    ap.add_argument("--layouts", nargs="+", default=[], metavar="LAYOUT",
                    help="only these layouts and the reference (names as reported; default: all)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sets = {"fortunes": lambda: fortunes(rng), "packages": lambda: packages(rng), "wordnet": lambda: wordnet(rng),
            "reuters": reuters}
    path = instruct_model_path(args.model)
    report = {"model": Path(path).name, "repeats": args.repeats, "reuters_repeats": args.reuters_repeats,
              "seed": args.seed, "sets": {}}
    with newrllama.Model(path) as model:
        for name in args.sets:
            repeats = args.reuters_repeats if name == "reuters" else args.repeats
            report["sets"][name] = run_set(model, name, sets[name](), repeats, args.seed, args.layouts)
    write_results("short-texts", report)
    for name, s in report["sets"].items():
        for k, r in s["layouts"].items():
            print(f"{name:9s} {k:31s} {r['seconds']:6.1f} s  x{r['ratio_to_reference']:.2f}  acc {r['accuracy']:.3f} "
                  f"kappa {r['kappa']:.3f}  order agreement {r['order_agreement']:.3f}")


if __name__ == "__main__":
    main()
