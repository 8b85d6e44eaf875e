"""A codebook: the labels of one question, what each means, and coded examples; and the prompts it makes.

The instruction, the labels (with their definitions) and the examples come before the
text, so every prompt of a call starts with the same tokens, which the prefix cache
decodes once. In a chat template the examples are earlier user/assistant turns (each
example text a user turn, its label the assistant's answer): measured on the Reuters
stories this scores better than the same examples written into the system turn
(bench/bench_validity.py, README). Without a template the prompt is plain text ending
in "Label:".
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Mapping, Sequence, Tuple

from .errors import InvalidArgumentError, TemplateError
from .params import check_choices

DEFAULT_INSTRUCTION = "Classify the text."
ExamplesIn = Literal["turns", "system"]


@dataclass(frozen=True)
class Codebook:
    """Labels in the order listed, a definition for some or all of them, and (text, label) examples."""

    labels: Tuple[str, ...]
    instruction: str = ""
    definitions: Tuple[Tuple[str, str], ...] = ()
    examples: Tuple[Tuple[str, str], ...] = ()

    def in_order(self, labels: Sequence[str]) -> "Codebook":
        """The same codebook with its labels (and their definitions) listed in another order."""
        return Codebook(tuple(labels), self.instruction, self.definitions, self.examples)

    def system_text(self, examples_in: ExamplesIn = "turns") -> str:
        lines = [self.instruction.strip() or DEFAULT_INSTRUCTION,
                 f"Answer with exactly one of these labels: {', '.join(self.labels)}."]
        meaning = dict(self.definitions)
        if meaning:
            lines.append("The labels mean:")
            lines += [f"- {label}: {meaning[label]}" for label in self.labels if label in meaning]
        if self.examples and examples_in == "system":
            lines.append("Examples:")
            lines += [f"Text: {text}\nLabel: {label}" for text, label in self.examples]
        return "\n".join(lines)

    def prompt(self, model, text: str, examples_in: ExamplesIn = "turns") -> str:
        system = self.system_text(examples_in)
        messages = [{"role": "system", "content": system}]
        if examples_in == "turns":
            for example, label in self.examples:
                messages += [{"role": "user", "content": example}, {"role": "assistant", "content": label}]
        try:
            return model.apply_chat_template(messages + [{"role": "user", "content": text}])
        except TemplateError:  # no chat template: a base model continues plain text
            shots = "".join(f"Text: {t}\nLabel: {label}\n\n" for t, label in self.examples) if examples_in == "turns" else ""
            return f"{system}\n\n{shots}Text: {text}\nLabel:"


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


def rotations(labels: Sequence[str]) -> List[Tuple[str, ...]]:
    """Every cyclic rotation of the label list, the listed order first: each label once in each position."""
    labels = tuple(labels)
    return [labels[r:] + labels[:r] for r in range(len(labels))]
