"""Texts longer than a sequence holds: annotate()'s ``too_long`` rule, which either lets such a text fail or cuts
it, by tokens, until its longest prompt and its longest label fit. What was cut is counted per text
(Annotation.tokens_cut) and the rule recorded in the provenance, so a methods paragraph can say it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Sequence, Union

from ..errors import InvalidArgumentError

# "error": the text fails and says how long it is; the others cut the text's end, its start, or its middle.
TOO_LONG = ("error", "truncate_end", "truncate_start", "truncate_middle")
# What each rule cut, in a methods paragraph's words.
CUT_WORDS = {"truncate_end": "their ends were left out", "truncate_start": "their starts were left out",
             "truncate_middle": "their middles were left out"}
# Where "truncate_middle" joined the text's start and end: the model sees that something was left out.
ELISION = " [...] "
# Retokenizing a cut text can merge or split tokens at the cut: a few rounds settle it.
_ROUNDS = 4


def check_too_long(value: object) -> str:
    if value not in TOO_LONG:
        raise InvalidArgumentError(f"too_long must be one of {', '.join(map(repr, TOO_LONG))}, got {value!r}")
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class FittedText:
    """A text as it is labelled, and how many of its tokens were cut to fit (0: the whole text)."""

    text: str
    tokens_cut: int = 0


def fit_text(model, text: str, prompt_tokens: Callable[[str], int], room: int, too_long: str
             ) -> Union[FittedText, str]:
    """``text`` cut by ``too_long`` until ``prompt_tokens(text)`` (its longest prompt) is at most ``room``, or the
    reason it cannot be (a str); "error" never cuts."""
    needed = prompt_tokens(text)
    if needed <= room:
        return FittedText(text)
    if too_long == "error":
        return (f"the text's prompt has {needed} tokens but a sequence holds at most {room} for a prompt with its "
                "longest label (n_ctx / n_seq_max): give too_long='truncate_end' (or 'truncate_start', "
                "'truncate_middle') to cut the text to fit, or use a larger n_ctx or a smaller n_seq_max")
    tokens = model.tokenize(text, add_special=False)
    keep = len(tokens) - (needed - room)
    for _ in range(_ROUNDS):
        if keep <= 0:
            break
        cut = _cut(model, tokens, keep, too_long)
        needed = prompt_tokens(cut)
        if needed <= room:
            return FittedText(cut, len(tokens) - keep)
        keep -= needed - room
    return (f"the prompt around the text takes more than the {room} tokens a sequence holds for it (with the longest "
            f"label), so no part of the text fits: use a larger n_ctx, a smaller n_seq_max or a shorter instruction")


def _cut(model, tokens: Sequence[int], keep: int, too_long: str) -> str:
    if too_long == "truncate_end":
        return model.detokenize(tokens[:keep])
    if too_long == "truncate_start":
        return model.detokenize(tokens[len(tokens) - keep:])
    head = (keep + 1) // 2
    tail: List[int] = list(tokens[len(tokens) - (keep - head):]) if keep > head else []
    return model.detokenize(tokens[:head]) + ELISION + model.detokenize(tail)
