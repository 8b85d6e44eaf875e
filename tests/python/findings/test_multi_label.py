"""Texts with several labels, asked as yes/no questions of a codebook: each label's share from the answers and the
coders' sets of labels."""
from __future__ import annotations

import numpy as np
import pytest

import newrllama
from newrllama.findings.multi_label import label_shares

QUESTIONS = ["acquisition", "crude oil", "earnings"]


def answers_for(rng, carries):
    """A codebook result per text: each label's question answered yes with a probability that leans to the truth."""
    out = []
    for labels in carries:
        row = {}
        for q in QUESTIONS:
            p_yes = float(np.clip((0.75 if q in labels else 0.2) + rng.normal(scale=0.15), 0.01, 0.99))
            row[q] = newrllama.Annotation("yes" if p_yes > 0.5 else "no", {"yes": p_yes, "no": 1 - p_yes})
        out.append(row)
    return out


def test_each_labels_share_is_covered_and_is_prevalence_of_its_own_question():
    rng = np.random.default_rng(9)
    carries = [{q for q, p in zip(QUESTIONS, (0.4, 0.3, 0.5)) if rng.random() < p} for _ in range(400)]
    results = answers_for(rng, carries)
    target = {q: sum(q in c for c in carries) / len(carries) for q in QUESTIONS}
    covered = dict.fromkeys(QUESTIONS, 0)
    draws = 200
    for _ in range(draws):
        coded = set(rng.choice(400, 60, replace=False).tolist())
        truth = [sorted(c) if i in coded else None for i, c in enumerate(carries)]
        shares = label_shares(results, truth)
        for q in QUESTIONS:
            s = shares.share(q)
            covered[q] += s.lower <= target[q] <= s.upper
    assert all(c >= 0.9 * draws for c in covered.values()), covered
    one = newrllama.prevalence([r["crude oil"] for r in results],
                               [None if t is None else ("yes" if "crude oil" in t else "no") for t in truth])
    assert shares.share("crude oil").estimate == one.share("yes").estimate
    assert [s.label for s in shares.shares] == QUESTIONS and shares.to_pandas().shape[0] == 3


def test_wrong_questions_or_codes_are_refused():
    rng = np.random.default_rng(1)
    results = answers_for(rng, [{"acquisition"}] * 4)
    with pytest.raises(newrllama.InvalidArgumentError, match=r"truth\[0\] must be a set or list of the labels"):
        label_shares(results, [{"oil"}, None, None, None])
    with pytest.raises(newrllama.InvalidArgumentError, match="two answers, 'ja' and another"):
        label_shares(results, [[], None, ["earnings"], None], yes="ja")
    with pytest.raises(newrllama.InvalidArgumentError, match="answers to a codebook"):
        label_shares([newrllama.Annotation("yes", {"yes": 0.9, "no": 0.1})] * 2, [None, None])
