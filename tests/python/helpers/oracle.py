"""An independent oracle: greedy tokens of our run against llama-cpp-python's logits of the sequence decoded alone
(its f16 KV cells and repacked weights round otherwise than our batch-invariant kernels, hence the margins)."""
from __future__ import annotations

import math
from typing import List

import llama_cpp
import numpy as np

# llama.cpp's CPU kernels round differently for different batch shapes; a token that
# was not the lone argmax must still be within this many logits of it.
MARGIN = 0.75

# How far a label's log-probability in choice_probs may be from the oracle's. Measured with
# llama-cpp-python alone (bench/choice_rounding.py, bench/results/choice-rounding-2026-11-28-AMD-EPYC.json):
# over the choices tests' 14 prompts and 58 labels, decoding with n_batch 1024, 16, 3 or 1 moves a
# label's normalised log-probability by up to 0.73 (an improbable label, log-probability -16.4; 0.45 for
# labels above -5). Our engine decodes in shapes of its own (several sequences per step, labels in a
# scratch sequence after a copied prefix) with its own K-quant kernel; its largest gap to the oracle there
# is 0.80 on that label, 0.63 above -5. The bound is 0.95, 1.3x llama.cpp's measured spread. A label scored
# on a wrong row, or without one of its tokens, is off by several logits.
CHOICE_MARGIN = 0.95


def worst_gap(llm, prompt_tokens: List[int], generated: List[int]) -> float:
    """Largest (max logit - logit of the chosen token) over the generated tokens, teacher-forced alone."""
    llm.reset()
    llm.eval(prompt_tokens + generated)
    scores = np.asarray(llm.scores[: len(prompt_tokens) + len(generated)])
    gaps = [float(scores[len(prompt_tokens) - 1 + k].max() - scores[len(prompt_tokens) - 1 + k][tok])
            for k, tok in enumerate(generated)]
    return max(gaps, default=0.0)


def assert_greedy_alone(llm, model, prompt: str, completion) -> None:
    gap = worst_gap(llm, model.tokenize(prompt), completion.token_ids)
    assert gap <= MARGIN, f"{prompt!r}: a token is {gap:.2f} logits below the argmax of the sequence alone"


def oracle_ends(llm, chat: bool):
    """What ends an answer, from llama-cpp-python's own tokenizer: after a chat prompt the template's
    <end_of_turn>, else a line break; end of generation (eos, eot) in both."""
    eot = llama_cpp.llama_vocab_eot(llama_cpp.llama_model_get_vocab(llm.model))
    if chat:
        texts = [b"<end_of_turn>"]
    else:
        texts = [b"\n", b"\n\n"]
    tokens = [llm.tokenize(t, add_bos=False, special=True) for t in texts]
    return sorted({t[0] for t in tokens if len(t) == 1} | {llm.token_eos(), eot})


def oracle_probs(llm, model, prompt: str, labels, chat: bool = False):
    """Softmax over labels of the log-probability of ' ' + label (or the label alone after a chat prompt)
    and then of any token that ends the answer, after the prompt, decoded alone."""
    prompt_tokens = model.tokenize(prompt)
    ends = oracle_ends(llm, chat)
    scores = []
    for label in labels:
        label_tokens = model.tokenize(label if chat else " " + label, add_special=False)
        llm.reset()
        llm.eval(prompt_tokens + label_tokens)
        logits = np.asarray(llm.scores[: len(prompt_tokens) + len(label_tokens)], dtype=np.float64)
        logsoftmax = [row - (row.max() + math.log(np.exp(row - row.max()).sum()))
                      for row in logits[len(prompt_tokens) - 1:]]
        total = sum(logsoftmax[j][t] for j, t in enumerate(label_tokens))
        total += math.log(sum(math.exp(logsoftmax[-1][e]) for e in ends))
        scores.append(total)
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return {label: w / sum(weights) for label, w in zip(labels, weights)}


def assert_close_to_oracle(completion, expected):
    """Every label's log-probability within CHOICE_MARGIN of the oracle's (see oracle.py for how that bound
    was measured), the improbable labels too; a wrong row or a missing token would be logits off."""
    for label, p in expected.items():
        assert abs(completion.choice_logprobs[label] - math.log(p)) <= CHOICE_MARGIN, (label, completion, expected)
