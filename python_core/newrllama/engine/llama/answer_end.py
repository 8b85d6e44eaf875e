"""What ends an answer, so that a label's score includes the model's saying it is finished.

Without an end, a label that begins another can never win: P(" crude oil") is at most
P(" crude"). So every label is scored followed by one of the tokens that end an answer
(their probabilities summed):
- after a prompt that opens the assistant's turn of the model's chat template: the
  template's end-of-turn token (Qwen ``<|im_end|>``, gemma ``<end_of_turn>``) and the
  end-of-generation tokens;
- after any other prompt (plain text, "Label:"): a line break (``\\n`` and ``\\n\\n``,
  where each is one token) and the end-of-generation tokens. A base model ends a short
  answer on its line; end-of-generation alone is rare there.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ...errors import TemplateError

_MARK = "\u2063LABEL\u2063"  # a text no template rewrites, to find where the assistant's content ends


class AnswerEnds:
    """A vocabulary's answer-ending tokens, worked out once from its chat template."""

    def __init__(self, vocab) -> None:
        eog = vocab.end_of_generation_tokens()
        lines = [ts[0] for ts in (vocab.tokenize(b"\n", False), vocab.tokenize(b"\n\n", False)) if len(ts) == 1]
        self.plain: Tuple[int, ...] = _unique(lines + eog)
        self.opening: Optional[Tuple[int, ...]] = None  # the tokens that open the assistant's turn
        self.chat: Tuple[int, ...] = self.plain
        try:
            without = vocab.apply_chat_template(["user"], [_MARK], False)
            opened = vocab.apply_chat_template(["user"], [_MARK], True)
            answered = vocab.apply_chat_template(["user", "assistant"], [_MARK, _MARK], False)
        except TemplateError:
            return
        after_answer = answered[answered.rindex(_MARK) + len(_MARK):] if answered.count(_MARK) == 2 else ""
        end_of_turn = vocab.tokenize(after_answer.encode("utf-8"), False)[:1]
        if opened.startswith(without) and len(opened) > len(without) and end_of_turn:
            self.opening = tuple(vocab.tokenize(opened[len(without):].encode("utf-8"), False))
            self.chat = _unique(end_of_turn + eog)

    def after(self, prompt_tokens: Sequence[int]) -> Tuple[int, ...]:
        """The tokens that end an answer to this prompt."""
        n = len(self.opening) if self.opening else 0
        if n and len(prompt_tokens) >= n and tuple(prompt_tokens[-n:]) == self.opening:
            return self.chat
        return self.plain


def _unique(tokens: List[int]) -> Tuple[int, ...]:
    return tuple(dict.fromkeys(tokens))
