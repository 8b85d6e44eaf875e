"""grammar and json_schema: every answer follows the grammar; no grammar can crash the process."""
from __future__ import annotations

import json
import time

import pytest

import newrllama
from newrllama._lib import lib

YES_NO = 'root ::= ("yes" | "no") "."'
SCHEMA = {"type": "object", "properties": {"label": {"enum": ["acq", "crude"]}, "score": {"type": "integer"}},
          "required": ["label", "score"]}
STORIES = ["Story: Texaco agreed to buy Getty Oil.\nJSON:", "Story: OPEC ministers cut crude output.\nJSON:",
           "Story: The union accepted the offer.\nJSON:"]


def test_answers_follow_the_grammar_greedy_and_sampled(ctx4):
    greedy = newrllama.SamplingParams(max_tokens=10, grammar=YES_NO)
    sampled = newrllama.SamplingParams(max_tokens=8, temperature=1.0, seed=5, grammar="root ::= [0-9]+")
    prompts = ["Is the sky blue? Answer:", "Is fire cold? Answer:", "Pick a word:", "Say hello:"]
    completions = ctx4.generate_parallel(prompts, [greedy, greedy, sampled, sampled])
    for c in completions[:2]:
        assert c.text in ("yes.", "no.") and c.finish_reason == "stop"
    # [0-9]+ may end after any digit: a sampled answer stops at the end of text or runs to max_tokens, as the
    # model's draws fall (they differ between CPUs whose matmul kernels round differently)
    for c in completions[2:]:
        assert c.text.isdigit(), c
        assert (c.finish_reason, c.n_gen_tokens) in [("length", 8)] + [("stop", n) for n in range(1, 8)], c


def test_a_grammar_is_parsed_once_per_call_for_all_its_prompts(ctx4, monkeypatch):
    parses = []
    parse = type(ctx4.model.vocab).parse_grammar

    def counted(vocab, gbnf):
        parses.append(gbnf)
        return parse(vocab, gbnf)

    monkeypatch.setattr(type(ctx4.model.vocab), "parse_grammar", counted)
    digits = newrllama.SamplingParams(max_tokens=6, grammar="root ::= [0-9]+", temperature=0.8, seed=3)
    yes_no = newrllama.SamplingParams(max_tokens=4, grammar='root ::= "yes" | "no"')
    prompts = [f"Question {i}: how many?" for i in range(6)] + ["Is it raining?"] * 3
    out = ctx4.generate_parallel(prompts, [digits] * 6 + [yes_no] * 3)
    assert sorted(parses) == sorted(["root ::= [0-9]+", 'root ::= "yes" | "no"'])
    assert all(c.text.isdigit() for c in out[:6]) and all(c.text in ("yes", "no") for c in out[6:])
    # Each sampler copies the parsed grammar at its start: the same prompt alone gives the same answer.
    assert ctx4.generate(prompts[2], digits).text == out[2].text


def test_json_schema_gives_valid_json(ctx4):
    params = newrllama.SamplingParams(max_tokens=60, json_schema=SCHEMA)
    for c in ctx4.generate_parallel(STORIES, params):
        assert c.finish_reason == "stop", c
        value = json.loads(c.text)
        assert value["label"] in ("acq", "crude") and isinstance(value["score"], int)


def test_constraints_mix_with_free_prompts_and_choices(ctx4):
    params = [newrllama.SamplingParams(max_tokens=60, json_schema=json.dumps(SCHEMA)),
              newrllama.SamplingParams(max_tokens=5),
              newrllama.SamplingParams(choices=["acq", "crude"]),
              newrllama.SamplingParams(max_tokens=10, grammar=YES_NO)]
    completions = ctx4.generate_parallel(STORIES + ["Is water wet? Answer:"], params)
    json.loads(completions[0].text)
    assert completions[1].n_gen_tokens == 5 and completions[2].text in ("acq", "crude")
    assert completions[3].text in ("yes.", "no.")
    assert ctx4.n_used_cells() == 0


def test_max_tokens_cuts_a_grammar_short_without_harm(ctx4):
    c = ctx4.generate(STORIES[0], newrllama.SamplingParams(max_tokens=3, json_schema=SCHEMA))
    assert c.finish_reason == "length" and c.text.startswith("{")
    assert ctx4.generate("Is the sky blue? Answer:", newrllama.SamplingParams(max_tokens=10, grammar=YES_NO)).text \
        in ("yes.", "no.")


def test_a_grammar_that_only_allows_the_end(ctx4):
    c = ctx4.generate("Anything:", newrllama.SamplingParams(max_tokens=10, grammar='root ::= ""'))
    assert c.text == "" and c.finish_reason == "stop"


@pytest.mark.parametrize("grammar,message", [
    ('x ::= "a"', "prompt 1"), ("root ::= root \"a\"", "could not be parsed"), ("root ::= (", "could not be parsed"),
    ('root ::= "unterminated', "could not be parsed"),
])
def test_bad_grammars_are_clear_errors_naming_the_prompt(ctx4, grammar, message):
    good = newrllama.SamplingParams(max_tokens=4)
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        ctx4.generate_parallel(["a", "b"], [good, newrllama.SamplingParams(grammar=grammar)])
    assert ctx4.generate("The capital of France is", good).finish_reason == "length"


@pytest.mark.parametrize("kwargs,message", [
    ({"grammar": ""}, "non-empty"), ({"grammar": "root ::= \"a\0\""}, "NUL"), ({"grammar": 3}, "non-empty"),
    ({"json_schema": {"type": "nonsense"}}, "cannot be converted"), ({"json_schema": "{not json"}, "cannot be converted"),
    ({"json_schema": {"$ref": "#/defs/missing"}}, "cannot be converted"), ({"json_schema": {"x": {1, 2}}}, "as JSON"),
    ({"grammar": YES_NO, "choices": ["a", "b"]}, "at most one"),
])
def test_bad_grammar_and_schema_arguments(kwargs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.SamplingParams(**kwargs)


def nested(depth: int) -> str:
    return "root ::= " + "(" * depth + '"a"' + ")" * depth


def alternatives(n_bytes: int) -> str:
    """A grammar of about n_bytes (never more): root ::= "w0" | "w1" | ..."""
    words, size = [], len("root ::= ")
    while size + len(f' | "w{len(words)}"') <= n_bytes:
        words.append(f'"w{len(words)}"')
        size += len(words[-1]) + 3
    return "root ::= " + " | ".join(words)


def repeated(n_symbols: int) -> str:
    """A literal of 50 characters repeated n_symbols / 50 times."""
    return 'root ::= "' + "a" * 50 + '"{' + str(n_symbols // 50) + "}"


def test_grammars_up_to_the_bounds_parse(model, ctx4):
    for grammar in (nested(lib.NEWRLLAMA_GRAMMAR_MAX_NESTING), alternatives(lib.NEWRLLAMA_GRAMMAR_MAX_BYTES),
                    repeated(lib.NEWRLLAMA_GRAMMAR_MAX_REPEATED)):
        assert len(grammar.encode()) <= lib.NEWRLLAMA_GRAMMAR_MAX_BYTES
        model.vocab.parse_grammar(newrllama.SamplingParams(grammar=grammar).gbnf)
    deep = ctx4.generate("Say a:", newrllama.SamplingParams(max_tokens=4, grammar=nested(1000)))
    assert deep.text == "a" and deep.finish_reason == "stop"


@pytest.mark.parametrize("grammar,bound", [
    (nested(lib.NEWRLLAMA_GRAMMAR_MAX_NESTING + 1), "NEWRLLAMA_GRAMMAR_MAX_NESTING"),
    (nested(30000), "NEWRLLAMA_GRAMMAR_MAX_NESTING"),  # 60 KB that overflowed llama.cpp's parser's stack
    (alternatives(lib.NEWRLLAMA_GRAMMAR_MAX_BYTES + 20), "NEWRLLAMA_GRAMMAR_MAX_BYTES"),
    (repeated(lib.NEWRLLAMA_GRAMMAR_MAX_REPEATED + 50), "NEWRLLAMA_GRAMMAR_MAX_REPEATED"),
    ('root ::= "' + "a" * 10000 + '"{2000}', "NEWRLLAMA_GRAMMAR_MAX_REPEATED"),  # 20 million symbols to build
])
def test_grammars_over_a_bound_are_refused_at_once(model, ctx4, grammar, bound):
    start = time.perf_counter()
    params = newrllama.SamplingParams(max_tokens=4, grammar=grammar)  # pure Python: the call checks the bounds
    with pytest.raises(newrllama.InvalidArgumentError, match=f"^the grammar of prompt 1 .*{bound}"):
        ctx4.generate_parallel(["a", "b"], [newrllama.SamplingParams(max_tokens=4), params])
    with pytest.raises(newrllama.InvalidArgumentError, match=bound):  # the C API's own check
        model.vocab.parse_grammar(grammar)
    assert time.perf_counter() - start < 0.5
    assert ctx4.n_used_cells() == 0 and ctx4.engine_stats().n_waiting == 0  # nothing of the call was submitted


def test_parentheses_in_literals_and_classes_do_not_count_as_nesting(model):
    grammar = 'root ::= "' + "(" * 2000 + '" [(((] "\\"((("'
    model.vocab.parse_grammar(newrllama.SamplingParams(grammar=grammar).gbnf)


def deep_schema(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema  # two JSON levels per array: the schema and nothing else (items is a dict)


def test_json_schemas_over_a_bound_are_refused_before_conversion():
    newrllama.SamplingParams(json_schema=deep_schema(newrllama.engine.sampling.params.MAX_SCHEMA_NESTING - 1))
    for schema in (deep_schema(newrllama.engine.sampling.params.MAX_SCHEMA_NESTING), deep_schema(100000),
                   '{"items": ' * 5000 + "{}" + "}" * 5000):
        start = time.perf_counter()
        with pytest.raises(newrllama.InvalidArgumentError, match="MAX_SCHEMA_NESTING"):
            newrllama.SamplingParams(json_schema=schema)
        assert time.perf_counter() - start < 0.5
    big = {"enum": [f"label number {i}" for i in range(5000)]}
    with pytest.raises(newrllama.InvalidArgumentError, match="MAX_SCHEMA_BYTES"):
        newrllama.SamplingParams(json_schema=big)
    # The converter writes maxLength n as n nested groups: 1,000 parse (llama.cpp refuses more itself).
    newrllama.SamplingParams(json_schema={"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 1000}, "tags": {"type": "array", "items": {"type": "string"},
                                                                 "maxItems": 50}}})
