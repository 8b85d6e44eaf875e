"""Answers from a fixed set of labels, each scored by the log-probability of all its tokens after the prompt.

The prompt's last token is decoded in a scoring slot whose one row gives every
label's first token (one log-sum-exp over the vocabulary for all labels). A label
of m > 1 tokens then needs the rows after its first m - 1 tokens: each such label
is a LabelJob, decoded in a scratch sequence that shares the prompt's cells (a
copy in the unified KV cache) and scored in the same step as everything else.
The scratch sequence is cleared after its one step."""
from __future__ import annotations

import math
from typing import Dict, List, Sequence, Tuple

from ._lib import ffi


def label_tokens(tokenize, labels: Sequence[str], spaced: bool) -> List[List[int]]:
    """The tokens each label adds after the prompt (with a leading space if the prompt ends in a word)."""
    return [tokenize(((" " + label) if spaced else label).encode("utf-8"), False) for label in labels]


def score_fields(targets: List[int], rows: List[int]):
    """C arrays for a scoring slot: targets, their rows, and room for the log-probabilities."""
    return (max(rows) + 1, len(targets), ffi.new("int32_t[]", targets), ffi.new("int32_t[]", rows),
            ffi.new("float[]", len(targets)))


class ChoiceScoring:
    """The scoring of one prompt's labels: first tokens from the prompt's last row, then one job per longer label."""

    __slots__ = ("labels", "tokens", "first", "logprob", "waiting", "running")

    def __init__(self, labels: Tuple[str, ...], tokens: List[List[int]]) -> None:
        self.labels = labels
        self.tokens = tokens
        self.first = score_fields([t[0] for t in tokens], [0] * len(tokens))
        self.logprob = [0.0] * len(labels)
        self.waiting = [k for k, t in enumerate(tokens) if len(t) > 1]  # labels still to be scored by a job
        self.running: List["LabelJob"] = []

    @property
    def longest(self) -> int:
        return max(len(t) for t in self.tokens)

    def record_first(self) -> None:
        logprobs = self.first[4]
        for k in range(len(self.labels)):
            self.logprob[k] = logprobs[k]
        self.first = None

    @property
    def done(self) -> bool:
        return self.first is None and not self.waiting and not self.running

    def result(self) -> Tuple[int, Dict[str, float]]:
        """Index of the most probable label, and every label's probability (softmax of the scores)."""
        top = max(self.logprob)
        weights = [math.exp(lp - top) for lp in self.logprob]
        total = sum(weights)
        best = max(range(len(self.labels)), key=self.logprob.__getitem__)
        return best, {label: w / total for label, w in zip(self.labels, weights)}


class LabelJob:
    """One multi-token label of one prompt, decoded in a scratch sequence: a holder of a step slot."""

    __slots__ = ("owner", "label", "seq", "n_past", "tokens", "n_tokens", "sampler", "score")

    def __init__(self, owner, label: int, seq: int, prompt_length: int, label_tokens: List[int]) -> None:
        self.owner = owner
        self.label = label
        self.seq = seq
        # Steps feed tokens[n_past:n_tokens] at position n_past: the label but its last token, after the
        # prompt (whose own tokens are never read from here).
        body = label_tokens[:-1]
        self.tokens = ffi.new("int32_t[]", [0] * prompt_length + body)
        self.n_past = prompt_length
        self.n_tokens = prompt_length + len(body)
        self.sampler = ffi.NULL
        self.score = score_fields(label_tokens[1:], list(range(len(body))))

    def total(self) -> float:
        logprobs = self.score[4]
        return sum(logprobs[i] for i in range(self.score[1]))

