"""An independent oracle: greedy tokens of our run against llama-cpp-python's logits of the sequence decoded alone
(its f16 KV cells and repacked weights round otherwise than our batch-invariant kernels, hence the margins)."""
from __future__ import annotations

from typing import List

import numpy as np

# llama.cpp's CPU kernels round differently for different batch shapes; a token that
# was not the lone argmax must still be within this many logits of it.
MARGIN = 0.75

# How far a label's log-probability in choice_probs may be from the oracle's. Measured with
# llama-cpp-python alone (bench/choice_rounding.py, bench/results/choice-rounding-2026-11-25-AMD-EPYC.json):
# over the choices tests' 14 prompts and 58 labels, decoding with n_batch 1024, 16, 3 or 1 moves a
# label's normalised log-probability by up to 0.57, improbable labels included. Our engine decodes in
# shapes of its own (several sequences per step, labels in a scratch sequence after a copied prefix);
# its largest gap to the oracle there is 0.68, within llama.cpp's own spread plus 20%. The bound is
# 0.75, 1.3x llama.cpp's measured spread. A label scored on a wrong row, or without one of its tokens,
# is off by several logits.
CHOICE_MARGIN = 0.75


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
