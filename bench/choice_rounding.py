"""How far batch shape alone moves a label's probability in llama.cpp: the bound the choices tests use.

The tests compare `choice_probs` with an oracle that scores each label (and what ends the answer)
with llama-cpp-python, decoding prompt and label alone in one batch. Our engine decodes the same
tokens in other batch shapes (prompts split into chunks, several sequences per step, labels in a
scratch sequence), and llama.cpp's CPU kernels round differently per shape. This script measures
that rounding with llama-cpp-python alone: the tests' prompts and labels, scored by the oracle with
n_batch = n_ubatch of 1024, 16, 3 and 1 (one token at a time), and for each label the spread (largest
minus smallest) of its normalised log-probability over the shapes. Then the same prompts through our engine as the tests run
them (one generate_parallel call per label set on a 4-sequence context), and each label's gap to the
oracle at n_batch 1024. Writes bench/results/choice-rounding-<date>-<cpu>.json.

    .venv/bin/python bench/choice_rounding.py
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import llama_cpp

import newrllama
from bench_results import write_results

TESTS = Path(__file__).resolve().parent.parent / "tests" / "python"
sys.path[:0] = [str(TESTS), str(TESTS / "engine")]
from helpers.oracle import oracle_probs  # noqa: E402
from helpers.samples import TOPIC_PROMPTS as STORIES, TOPICS  # noqa: E402
from test_choices import CAPITALS, NESTED, SHARED_STARTS, capital_prompt, chat_copy_prompt, copy_prompt  # noqa: E402

SHAPES = [1024, 16, 3, 1]


def cases(model):
    out = [(capital_prompt(c), CAPITALS.choices, False) for c in ["France", "Spain", "Germany", "Italy"]]
    out += [(s, TOPICS.choices, False) for s in STORIES] + [(s, SHARED_STARTS, False) for s in STORIES]
    out += [(copy_prompt(w), NESTED, False) for w in NESTED] + [(chat_copy_prompt(model), NESTED, True)]
    return out


def main() -> None:
    with newrllama.Model() as model:
        work = cases(model)
        by_shape = {}
        for n_batch in SHAPES:
            start = time.perf_counter()
            llm = llama_cpp.Llama(newrllama.default_model_path(), n_ctx=512, n_batch=n_batch, n_ubatch=n_batch,
                                  logits_all=True, verbose=False, n_threads=2)
            by_shape[n_batch] = [oracle_probs(llm, model, prompt, labels, chat=chat) for prompt, labels, chat in work]
            llm.close()
            print(f"n_batch {n_batch}: {time.perf_counter() - start:.0f} s", flush=True)
        ours = engine_probs(model, work)
    rows = []
    for i, (prompt, labels, chat) in enumerate(work):
        for label in labels:
            logp = {n: math.log(by_shape[n][i][label]) for n in SHAPES}
            rows.append({"case": i, "label": label, "chat": chat, "log_prob": logp,
                         "spread": max(logp.values()) - min(logp.values()),
                         "engine_gap": abs(math.log(ours[i][label]) - logp[SHAPES[0]])})
    worst = max(rows, key=lambda r: r["spread"])
    gap = max(rows, key=lambda r: r["engine_gap"])
    print(f"{len(rows)} labels in {len(work)} prompts; largest spread of a label's log-probability "
          f"over n_batch {SHAPES}: {worst['spread']:.3f} ({worst['label']!r}, log-probability "
          f"{min(worst['log_prob'].values()):.2f}); largest gap of the engine to n_batch {SHAPES[0]}: "
          f"{gap['engine_gap']:.3f} ({gap['label']!r})")
    write_results("choice-rounding", {"shapes": SHAPES, "prompts": [p for p, _, _ in work], "rows": rows,
                                      "largest_spread": worst["spread"], "largest_engine_gap": gap["engine_gap"]})


def engine_probs(model, work):
    """choice_probs of each case from our engine, the prompts of one label set in one call, as the tests run."""
    out = [None] * len(work)
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as ctx:
        for labels in {tuple(labels) for _, labels, _ in work}:
            picked = [i for i, (_, l, _) in enumerate(work) if tuple(l) == labels]
            done = ctx.generate_parallel([work[i][0] for i in picked], newrllama.SamplingParams(choices=list(labels)))
            for i, completion in zip(picked, done):
                out[i] = completion.choice_probs
    return out


if __name__ == "__main__":
    main()
