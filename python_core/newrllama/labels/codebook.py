"""A codebook: the labels of one question, what each means, and coded examples; and the prompts it makes.

A prompt is, in the model's chat template: the instruction in the system turn; the examples
as earlier user/assistant turns (each example text a user turn, its label the assistant's
answer), or written into the system turn; then the text, the labels' definitions, and last
the list of labels to answer with. Everything before the text is the same for every text of
a call and everything before the list the same for every listing order of a text, so the
prefix cache decodes the instruction and examples once per call, and each text with the
definitions once for all the orders its labels are scored in (order_bias.py). A short text
without definitions (fewer tokens than two lists: a headline, a survey answer) has the list
at the end of the system turn instead, one system turn per listing order, each decoded once per
call: its text is then decoded once per order, which costs less than the list once per order
after it, and on human-sorted one-liners labelled better (bench/bench_short_texts.py). The
definitions are listed in the labels' sorted order, so that the order the labels were given
in reaches only the list. They come after the text because that is where the instruct model
uses them: on the Reuters stories, in the system turn they made it give every story one label,
after the text it told the topics apart (bench/bench_validity.py, its results in docs/benchmarks.md,
"Labels on real text").
Without a template the prompt is plain text ending in "Label:".

Several questions about each text (a codebook of questions) ask each question after the text, with
its definitions and then its list of labels: a text is decoded once for all its questions, and a
question's definitions once for all the orders its labels are listed in.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError, TemplateError
from .order_bias import sorted_labels
from ..engine.sampling.params import check_choices

DEFAULT_INSTRUCTION = "Classify the text."
DEFAULT_QUESTIONS_INSTRUCTION = "Read the text and answer the question about it."
ExamplesIn = Literal["turns", "system"]


@dataclass(frozen=True)
class Codebook:
    """Labels in the order listed, a definition for some or all of them, and (text, label) examples."""

    labels: Tuple[str, ...]
    instruction: str = ""
    definitions: Tuple[Tuple[str, str], ...] = ()
    examples: Tuple[Tuple[str, str], ...] = ()
    question: Optional[str] = None  # one question of several about each text: the text comes first

    def in_order(self, labels: Sequence[str]) -> "Codebook":
        """The same codebook with its labels (and their definitions) listed in another order."""
        return Codebook(tuple(labels), self.instruction, self.definitions, self.examples, self.question)

    def label_list(self) -> str:
        return f"Answer with exactly one of these labels: {', '.join(self.labels)}."

    def definition_lines(self, labels: Sequence[str]) -> List[str]:
        meaning = dict(self.definitions)
        if not meaning:
            return []
        return ["The labels mean:"] + [f"- {label}: {meaning[label]}" for label in labels if label in meaning]

    def answer_lines(self) -> List[str]:
        """What follows the text (and question): the definitions in sorted order, then the list as listed."""
        return self.definition_lines(sorted_labels(self.labels)) + [self.label_list()]

    def system_text(self, examples_in: ExamplesIn = "system") -> str:
        lines = [self.instruction.strip() or DEFAULT_INSTRUCTION]
        if self.examples and examples_in == "system":
            lines.append("Examples:")
            lines += [f"Text: {text}\nLabel: {label}" for text, label in self.examples]
        return "\n".join(lines)

    def list_length(self, model) -> int:
        """Tokens of the list of labels in sorted order: what lists_first compares a text with."""
        return len(model.tokenize(self.in_order(sorted_labels(self.labels)).label_list()))

    def lists_first(self, n_text_tokens: int, n_list_tokens: int) -> bool:
        """Whether a text's prompts carry the list of labels in the system turn, before the text: for a text without
        definitions shorter than two lists, where decoding the text once per listing order costs less than the
        list once per order after it, and labels better (bench/bench_short_texts.py). Judged on the list in sorted
        order (list_length), so that every listing order of a text takes the same layout. A codebook's question
        always comes after the text, which its questions share."""
        return self.question is None and not self.definitions and n_text_tokens < 2 * n_list_tokens

    def prompt(self, model, text: str, examples_in: ExamplesIn = "system", lists_first: Optional[bool] = None) -> str:
        """The chat prompt for text. lists_first: the layout (see lists_first), judged here when not given; a
        caller that builds many prompts measures each text and list once and passes it."""
        if self.question is not None:
            return self._question_prompt(model, text)
        system = self.system_text(examples_in)
        if lists_first is None:
            lists_first = self.lists_first(len(model.tokenize(text)), self.list_length(model))
        if lists_first:
            system = f"{system}\n{self.label_list()}"
        messages = [{"role": "system", "content": system}]
        if examples_in == "turns":
            for example, label in self.examples:
                messages += [{"role": "user", "content": example}, {"role": "assistant", "content": label}]
        ask = text if lists_first else "\n".join([text, ""] + self.answer_lines())
        try:
            return model.apply_chat_template(messages + [{"role": "user", "content": ask}])
        except TemplateError:  # no chat template: a base model continues plain text
            shots = "".join(f"Text: {t}\nLabel: {label}\n\n" for t, label in self.examples) if examples_in == "turns" else ""
            return f"{system}\n\n{shots}Text: {ask}\nLabel:"

    def _question_prompt(self, model, text: str) -> str:
        """The text first, then the question, its definitions (in sorted order) and last the list of labels:
        a text's prompts share its tokens, and the listing orders of one question share its definitions."""
        system = self.instruction.strip() or DEFAULT_QUESTIONS_INSTRUCTION
        ask = "\n".join([f"Text: {text}", "", f"Question: {self.question}"] + self.answer_lines())
        try:
            return model.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": ask}])
        except TemplateError:
            return f"{system}\n\n{ask}\nLabel:"


def _normal(label: str) -> str:
    return " ".join(unicodedata.normalize("NFC", label).split()).casefold()


def check_codebook(labels: object, instruction: object, definitions: object = None,
                   examples: object = None) -> Codebook:
    """A Codebook from annotate()'s arguments; ``labels`` may be a dict label -> definition."""
    if not isinstance(instruction, str):
        raise InvalidArgumentError(f"instruction must be a str, got {type(instruction).__name__}")
    meaning: Dict[str, str] = {}
    if isinstance(labels, Mapping):
        meaning.update(_definitions(labels, "labels"))
        labels = list(labels)
    checked = check_choices(labels)
    if checked is None:
        raise InvalidArgumentError("labels must be a list of at least 2 labels")
    seen: Dict[str, str] = {}
    for label in checked:
        other = seen.setdefault(_normal(label), label)
        if other != label:
            raise InvalidArgumentError(f"labels {other!r} and {label!r} are the same label but for case or spacing")
    if definitions is not None:
        if not isinstance(definitions, Mapping):
            raise InvalidArgumentError(f"definitions must be a dict label -> definition, got {type(definitions).__name__}")
        meaning.update(_definitions(definitions, "definitions"))
    for label in meaning:
        if label not in checked:
            raise InvalidArgumentError(f"definitions name {label!r}, which is not one of the labels {list(checked)}")
    return Codebook(checked, instruction, tuple((label, meaning[label]) for label in checked if label in meaning),
                    _examples(examples, checked))


def _definitions(mapping: Mapping[Any, Any], name: str) -> Dict[str, str]:
    out = {}
    for label, definition in mapping.items():
        if not isinstance(label, str):
            raise InvalidArgumentError(f"{name} must have str keys (the labels), got {label!r}")
        if definition is None or definition == "":
            continue  # a label without a definition
        if not isinstance(definition, str) or not definition.strip():
            raise InvalidArgumentError(f"the definition of {label!r} must be a non-blank str, got {definition!r}")
        out[label] = definition.strip()
    return out


def _examples(examples: object, labels: Tuple[str, ...]) -> Tuple[Tuple[str, str], ...]:
    if examples is None:
        return ()
    if isinstance(examples, (str, bytes)) or not isinstance(examples, Sequence):
        raise InvalidArgumentError("examples must be a list of (text, label) pairs")
    out: List[Tuple[str, str]] = []
    for i, pair in enumerate(examples):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidArgumentError(f"examples[{i}] must be a (text, label) pair, got {pair!r}")
        text, label = pair
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgumentError(f"examples[{i}] has no text: {text!r}")
        if label not in labels:
            raise InvalidArgumentError(f"examples[{i}] has the label {label!r}, which is not one of {list(labels)}")
        out.append((text, label))
    return tuple(out)

def check_questions(codebook: object, instruction: object) -> Dict[str, Codebook]:
    """One Codebook per question of a multi-question codebook: question -> labels (a list or a dict label ->
    definition)."""
    if not isinstance(codebook, Mapping) or not codebook:
        raise InvalidArgumentError("codebook must be a non-empty dict: question -> labels (a list, or a dict "
                                   "label -> definition)")
    out = {}
    for question, labels in codebook.items():
        if not isinstance(question, str) or not question.strip():
            raise InvalidArgumentError(f"codebook questions must be non-blank str, got {question!r}")
        if "\0" in question:
            raise InvalidArgumentError(f"the codebook question {question!r} contains a NUL character")
        try:
            book = check_codebook(labels, instruction)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"codebook[{question!r}]: {exc}") from None
        out[question] = Codebook(book.labels, book.instruction, book.definitions, (), question.strip())
    return out
