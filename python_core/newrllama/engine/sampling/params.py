"""Sampling parameters: pure Python, checked against the sampling table (sampling_table.py) when made; a grammar's
bounds and parse are checked for the model's vocabulary when a call is prepared (parallel.py), and the C
structures are made there too."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ...errors import InvalidArgumentError
from .sampling_table import FIELDS, SAMPLING_FIELDS

MAX_CHOICES = 1024
MAX_STOP = 64  # every stop string is searched for after every token
# A json_schema is measured before the converter (which recurses per level) reads it; the grammar it
# converts to must then keep to the grammar bounds (NEWRLLAMA_GRAMMAR_MAX_* in newrllama_capi.h), which the
# C library checks when a call is prepared, before llama.cpp parses it.
MAX_SCHEMA_BYTES = 64 * 1024    # of its JSON text
MAX_SCHEMA_NESTING = 64         # objects and arrays inside one another in its JSON


@dataclass(frozen=True)
class SamplingParams:
    """How to sample the answer to a prompt.

    The defaults are deterministic: ``temperature=0`` is greedy decoding and
    ``seed`` is fixed, so running the same prompts again gives the same text.
    With ``temperature > 0`` every prompt gets its own random stream, derived
    from ``seed``, the prompt's tokens and how many identical prompts came
    before it in the call (never from its position): re-running a subset of the
    prompts gives the same answers, and identical prompts in one call give
    different but reproducible samples. A negative ``seed`` draws a random seed.

    ``max_tokens`` counts tokens; generation also stops at an end-of-generation
    token, at any of the ``stop`` strings (which are left out of the text), or
    when the prompt's share of the context is full.

    ``choices``: the answer is exactly one of these strings, the most probable
    one (sampling settings do not apply). Each label is scored by the
    log-probability of its whole token sequence after the prompt followed by what
    ends an answer (the sum over its tokens, not normalised by length; with a space
    in front when the prompt text does not end in whitespace, as the model would
    write it). What ends an answer: after a prompt that opens the assistant's turn
    of the model's chat template, its end-of-turn token (or end of generation);
    after any other prompt, a line break (or end of generation). So "crude" and
    "crude oil" can both win. ``Completion.choice_probs`` holds the softmax of
    those scores over the labels, ``Completion.choice_logprobs`` its log, computed as
    such (so that a label whose probability rounds to 0 keeps a finite score).

    ``grammar`` (GBNF, with a rule named ``root``) or ``json_schema`` (a dict or
    its JSON text, converted to GBNF by llama-cpp-python's own converter)
    constrain the answer token by token; ``max_tokens`` may still cut it short
    (``finish_reason='length'``). At most one of choices, grammar, json_schema.
    A schema of more than 64 KiB of JSON or nested more than 64 objects and arrays
    deep is refused here; a grammar (given, or converted from the schema) of more than
    64 KiB, with groups ``( )`` nested more than 1,024 deep, or whose repetitions
    ``{m,n}`` write out more than 100,000 symbols, or that does not parse, is refused
    by the call that gets it, before any of its prompts runs: llama.cpp's parser would
    take the process down or hold it for long (each maxLength or maxItems n of a
    schema becomes n nested groups).
    """

    # Defaults and ranges: sampling_table.SAMPLING_FIELDS.
    max_tokens: int = FIELDS["max_tokens"].default  # type: ignore[assignment]
    temperature: float = FIELDS["temperature"].default
    top_k: int = FIELDS["top_k"].default  # type: ignore[assignment]
    top_p: float = FIELDS["top_p"].default
    min_p: float = FIELDS["min_p"].default
    repeat_last_n: int = FIELDS["repeat_last_n"].default  # type: ignore[assignment]
    penalty_repeat: float = FIELDS["penalty_repeat"].default
    seed: int = FIELDS["seed"].default  # type: ignore[assignment]
    stop: Union[Sequence[str], str, None] = field(default=())
    choices: Optional[Sequence[str]] = None
    grammar: Optional[str] = None
    json_schema: Union[Dict[str, Any], str, None] = None
    gbnf: Optional[str] = field(default=None, init=False, repr=False, compare=False)  # grammar or converted schema

    def __post_init__(self) -> None:
        for f in SAMPLING_FIELDS:
            f.check(getattr(self, f.name))
        if self.stop is not None and not isinstance(self.stop, (str, Sequence)):
            raise InvalidArgumentError(f"stop must be a str or a list of str, got {type(self.stop).__name__}")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if len(stop) > MAX_STOP:
            raise InvalidArgumentError(f"stop must hold at most {MAX_STOP} strings, got {len(stop)}")
        for s in stop:
            if not isinstance(s, str) or not s:
                raise InvalidArgumentError(f"stop must be non-empty strings, got {s!r}")
            if "\0" in s:
                raise InvalidArgumentError("stop strings must not contain a NUL character")
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "choices", check_choices(self.choices))
        if sum(x is not None for x in (self.choices, self.grammar, self.json_schema)) > 1:
            raise InvalidArgumentError("give at most one of choices, grammar and json_schema")
        if self.grammar is not None:
            object.__setattr__(self, "gbnf", _check_text("grammar", self.grammar))
        elif self.json_schema is not None:
            object.__setattr__(self, "gbnf", _schema_to_gbnf(self.json_schema))


def _check_text(name: str, text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"{name} must be a non-empty str, got {text!r}")
    if "\0" in text:
        raise InvalidArgumentError(f"{name} contains a NUL character")
    return text


def _nesting_over(value: object, bound: int) -> bool:
    """Whether dicts and lists nest more than bound deep in value (without recursion, and stopping
    there, so that a deep or cyclic value costs little)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > bound:
            return True
        todo.extend((child, depth + 1) for child in children)
    return False


def _schema_text(schema: object) -> str:
    """The schema's JSON text, within MAX_SCHEMA_BYTES and MAX_SCHEMA_NESTING."""
    too_deep = f"json_schema nests objects and arrays more than {MAX_SCHEMA_NESTING} deep (MAX_SCHEMA_NESTING)"
    if isinstance(schema, dict):
        if _nesting_over(schema, MAX_SCHEMA_NESTING):
            raise InvalidArgumentError(too_deep)
        try:
            text = json.dumps(schema)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"json_schema cannot be written as JSON: {exc}") from None
    else:
        text = _check_text("json_schema", schema)
    if len(text.encode("utf-8")) > MAX_SCHEMA_BYTES:
        raise InvalidArgumentError(f"json_schema is longer than {MAX_SCHEMA_BYTES} bytes of JSON (MAX_SCHEMA_BYTES)")
    if not isinstance(schema, dict):
        try:
            deep = _nesting_over(json.loads(text), MAX_SCHEMA_NESTING)
        except RecursionError:
            deep = True
        except ValueError:
            deep = False  # not JSON: the converter says so
        if deep:
            raise InvalidArgumentError(too_deep)
    return text


def _schema_to_gbnf(schema: object) -> str:
    text = _schema_text(schema)
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # the reference converter, loaded when needed
    try:
        return _check_text("the grammar converted from json_schema", json_schema_to_gbnf(text))
    except InvalidArgumentError:
        raise
    except Exception as exc:  # the converter raises what it meets: ValueError, KeyError, JSONDecodeError ...
        raise InvalidArgumentError(f"json_schema cannot be converted to a grammar: {type(exc).__name__}: {exc}") from None


def check_choices(choices: object) -> Optional[Tuple[str, ...]]:
    if choices is None:
        return None
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
        raise InvalidArgumentError("choices must be a list of str (the labels), not a single string")
    labels = tuple(choices)
    if not 2 <= len(labels) <= MAX_CHOICES:
        raise InvalidArgumentError(f"choices must hold 2 to {MAX_CHOICES} labels, got {len(labels)}")
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label.strip():
            raise InvalidArgumentError(f"choices[{i}] must be a non-blank str, got {label!r}")
        if "\0" in label:
            raise InvalidArgumentError(f"choices[{i}] contains a NUL character")
    if len(set(labels)) != len(labels):
        dup = next(label for label in labels if labels.count(label) > 1)
        raise InvalidArgumentError(f"choices holds {dup!r} more than once")
    return labels
