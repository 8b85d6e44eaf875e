"""Codebooks: labels with definitions and coded examples, checked, and placed around the text in the prompt."""
from __future__ import annotations

import math

import pytest

import newrllama
from newrllama.labels.codebook import check_codebook, check_questions
from newrllama.labels.order_bias import rotations
from newrllama.labels.order_bias import sample_of
from newrllama.engine.kv.prefix_cache import MIN_SHARED_TOKENS

DEFS = {"sports": "games, matches and athletes.", "business": "companies, markets and money.",
        "weather": "rain, wind and temperatures."}
TEXTS = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
         "Heavy rain and strong winds are expected tomorrow.", "The champion retired after twenty seasons."]
EXAMPLES = [("The goalkeeper saved a penalty in the last minute.", "sports"),
            ("The airline reported a loss for the year.", "business")]


def assert_same_up_to_rounding(p, q):
    """Batch shapes round logits apart (oracle.py): log-probabilities within its bound for labels."""
    from helpers.oracle import CHOICE_MARGIN
    for label in p:
        assert abs(math.log(p[label]) - math.log(q[label])) <= CHOICE_MARGIN, (p, q)


def test_examples_come_before_the_text_and_definitions_after_it(model):
    book = check_codebook(DEFS, "Give the topic.", None, EXAMPLES)
    assert book.labels == ("sports", "business", "weather") and dict(book.definitions) == DEFS
    prompt = book.prompt(model, "TEXT HERE", "turns")
    for needle in ("Give the topic.", "- business: companies, markets and money.", EXAMPLES[0][0], "TEXT HERE"):
        assert prompt.count(needle) == 1
    # As chat turns: the example's label is the model's own earlier answer.
    assert prompt.index(EXAMPLES[1][0]) < prompt.index("<start_of_turn>model\nbusiness<end_of_turn>") < prompt.index("TEXT")
    # The definitions follow the text in its own turn, then the list.
    assert prompt.index("TEXT HERE\n\nThe labels mean:\n- business:") < prompt.index("- weather:") < prompt.index(
        "Answer with exactly one of these labels: sports, business, weather.<end_of_turn>")
    system = book.prompt(model, "TEXT HERE")  # the default
    assert "Text: " + EXAMPLES[0][0] + "\nLabel: sports" in system and system.count("<start_of_turn>model") == 1
    assert system.index("Label: business") < system.index("TEXT HERE") < system.index("The labels mean:")
    # Another listing order changes only the list after the definitions; the definitions stay sorted.
    reordered = book.in_order(("weather", "sports", "business")).prompt(model, "x")
    assert reordered.index("- business:") < reordered.index("- sports:") < reordered.index("- weather:")
    listed = book.prompt(model, "x")
    start = listed.index("Answer with exactly one of these labels: ")
    assert listed.index("x\n\nThe labels mean:") < start
    assert reordered[:start] == listed[:start] and reordered.endswith("weather, sports, business.<end_of_turn>\n"
                                                                      "<start_of_turn>model\n")
    assert rotations(("a", "b", "c")) == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")]


def test_the_codebook_is_decoded_once_per_call(model):
    with newrllama.Context(model, n_ctx=8192, n_seq_max=4, n_threads=2) as ctx:
        results = newrllama.annotate(TEXTS, DEFS, "Give the topic of the news text.", examples=EXAMPLES,
                                     context=ctx, debias="none")
        assert all(r.label in DEFS for r in results)
        book = check_codebook(DEFS, "Give the topic of the news text.", None, EXAMPLES)
        first, second = (model.tokenize(book.prompt(model, text)) for text in TEXTS[:2])
        shared = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)  # instruction and examples
        assert shared >= MIN_SHARED_TOKENS  # long enough to be shared
        # the shared start, counted for each text but the first
        assert ctx.last_stats.n_cached_tokens >= (len(TEXTS) - 1) * shared


def test_each_debias_method_keeps_raw_and_order_free_probabilities(model):
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8, n_threads=2) as ctx:
        labels = list(DEFS)
        none = newrllama.annotate(TEXTS, sorted(labels), context=ctx, debias="none")  # the debias methods' base order
        rot = newrllama.annotate(TEXTS, labels, context=ctx, debias="rotations")
        prior = newrllama.annotate(TEXTS, labels, context=ctx, debias="prior")
        batch = newrllama.annotate(TEXTS, labels, context=ctx, debias="batch")
    for a, b in zip(none, rot):
        assert_same_up_to_rounding(a.raw_probs, b.raw_probs)  # both the sorted order
        assert b.probs == b.order_free_probs and sum(b.probs.values()) == pytest.approx(1)
        assert b.label == max(b.probs, key=b.probs.get)
    for a in none:
        assert a.probs == pytest.approx(a.raw_probs)
    # "prior" scores its sample under every rotation, as "rotations" does, and no other text.
    sample = sample_of(list(range(len(TEXTS))), len(labels))
    for i, (a, b) in enumerate(zip(prior, rot)):
        if i in sample:
            assert_same_up_to_rounding(a.probs, b.probs)
    assert all(a.label in DEFS for a in prior + batch)


@pytest.mark.parametrize("kwargs,message", [
    ({"labels": ["a", "b"], "examples": [("text", "c")]}, "label 'c', which is not one of"),
    ({"labels": ["a", "b"], "examples": [("", "a")]}, "no text"),
    ({"labels": ["a", "b"], "examples": [("text",)]}, "pair"),
    ({"labels": ["a", "b"], "examples": "text"}, "list of"),
    ({"labels": ["Crude  oil", "crude oil"]}, "same label but for case or spacing"),
    ({"labels": ["a", "a"]}, "more than once"), ({"labels": ["a", " "]}, "non-blank"),
    ({"labels": {"a": "x", "b": 3}}, "definition of 'b'"),
    ({"labels": ["a", "b"], "definitions": {"c": "x"}}, "'c', which is not one of the labels"),
    ({"labels": ["a", "b"], "definitions": ["a"]}, "dict"),
    ({"labels": ["a", "b"], "debias": "sometimes"}, "debias must be one of"),
    ({"labels": ["a", "b"], "examples_in": "user"}, "examples_in"),
    ({"labels": ["a", "b"], "calibration": "cal"}, "calibrate"),
])
def test_bad_codebooks_are_clear_errors(kwargs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.annotate(["a text"], **kwargs)


QUESTIONS = {"topic": ["sports", "business", "weather"],
             "tone": {"good news": "something went well", "bad news": "something went badly"},
             "place": ["a country", "a city", "nowhere named"]}


def test_several_questions_share_each_texts_tokens(model):
    with newrllama.Context(model, n_ctx=8192, n_seq_max=8, n_threads=2) as ctx:
        results = newrllama.annotate(TEXTS + [None], codebook=QUESTIONS, context=ctx)
        stats = ctx.last_stats
        one = newrllama.annotate(TEXTS, codebook={"topic": QUESTIONS["topic"]}, context=ctx, debias="none")
    assert [sorted(r) for r in results] == [sorted(QUESTIONS)] * 5
    for r in results[:4]:
        for q, a in r.items():
            assert a.label in QUESTIONS[q] and sum(a.probs.values()) == pytest.approx(1)
    assert all(a.error == "text is missing or empty" for a in results[4].values())
    # Each text is decoded once for its 3 questions x 2 listing orders: 6 prompts share it.
    shortest = min(len(model.tokenize(t)) for t in TEXTS)
    assert stats.n_prompts == 4 * 6 and stats.n_cached_tokens >= 4 * 5 * shortest  # one of the 6 decodes it
    assert [r["topic"].label for r in one] != [] and all(r["topic"].label in QUESTIONS["topic"] for r in one)
    tone = check_questions(QUESTIONS, "").get("tone")
    prompt = tone.prompt(model, "TEXT HERE")
    assert (prompt.index("TEXT HERE") < prompt.index("Question: tone") < prompt.index("- good news: something went well")
            < prompt.index("Answer with exactly one"))
    # The listing orders of a question differ only from its list of labels on.
    reversed_prompt = tone.in_order(tone.labels[::-1]).prompt(model, "TEXT HERE")
    assert reversed_prompt != prompt
    assert reversed_prompt[:reversed_prompt.index("Answer with")] == prompt[:prompt.index("Answer with")]


@pytest.mark.parametrize("kwargs,message", [
    ({"codebook": QUESTIONS, "labels": ["a", "b"]}, "not both or neither"), ({}, "not both or neither"),
    ({"codebook": {}}, "non-empty dict"), ({"codebook": ["a", "b"]}, "non-empty dict"),
    ({"codebook": {" ": ["a", "b"]}}, "non-blank"), ({"codebook": {"topic": ["a"]}}, r"codebook\['topic'\]: .*2 to"),
    ({"codebook": QUESTIONS, "examples": [("x", "sports")]}, "examples are for one question"),
    ({"codebook": QUESTIONS, "calibration": {"mood": None}}, "not in the codebook"),
    ({"codebook": QUESTIONS, "calibration": "cal"}, "dict question -> Calibration"),
])
def test_bad_multi_question_codebooks_are_clear_errors(kwargs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.annotate(["a text"], **kwargs)
