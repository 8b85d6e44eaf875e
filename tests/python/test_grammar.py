"""grammar and json_schema: every answer follows the grammar; no grammar can crash the process."""
from __future__ import annotations

import json

import pytest

import newrllama

YES_NO = 'root ::= ("yes" | "no") "."'
SCHEMA = {"type": "object", "properties": {"label": {"enum": ["acq", "crude"]}, "score": {"type": "integer"}},
          "required": ["label", "score"]}
STORIES = ["Story: Texaco agreed to buy Getty Oil.\nJSON:", "Story: OPEC ministers cut crude output.\nJSON:",
           "Story: The union accepted the offer.\nJSON:"]


@pytest.fixture
def ctx4(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as c:
        yield c


def test_answers_follow_the_grammar_greedy_and_sampled(ctx4):
    greedy = newrllama.SamplingParams(max_tokens=10, grammar=YES_NO)
    sampled = newrllama.SamplingParams(max_tokens=8, temperature=1.0, seed=5, grammar="root ::= [0-9]+")
    prompts = ["Is the sky blue? Answer:", "Is fire cold? Answer:", "Pick a word:", "Say hello:"]
    completions = ctx4.generate_parallel(prompts, [greedy, greedy, sampled, sampled])
    for c in completions[:2]:
        assert c.text in ("yes.", "no.") and c.finish_reason == "stop"
    for c in completions[2:]:
        assert c.text.isdigit() and c.finish_reason == "length"


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
