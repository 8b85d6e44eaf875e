"""Prompts shared by the tests, and what every answer to labels must hold."""
import pytest

import newrllama

FRANCE = "The capital of Germany is Berlin. The capital of Italy is Rome. The capital of France is"
PROMPTS = [
    "The capital of France is",
    "1, 2, 3, 4,",
    "Once upon a time, in a small village,",
    "The chemical symbol for gold is",
    "def fibonacci(n):",
    "My favourite fruit is",
    "The sun rises in the",
    "Water boils at",
]

TOPICS = newrllama.SamplingParams(choices=["acquisition", "crude oil", "interest rates", "sports results"])
TOPIC_PROMPTS = ["News: Texaco agreed to buy Getty Oil for ten billion dollars in cash.\nTopic:",
                 "News: OPEC ministers agreed to cut crude production to support prices.\nTopic:",
                 "News: The Federal Reserve raised its discount rate by half a point.\nTopic:"]


def check_labels(completions, params):
    """Each answer one of the labels, the most probable, with a probability for every label summing to 1."""
    for c in completions:
        assert c.finish_reason == "stop" and c.error is None
        assert c.text in params.choices
        assert set(c.choice_probs) == set(params.choices)
        assert sum(c.choice_probs.values()) == pytest.approx(1.0, abs=1e-6)
        assert max(c.choice_probs, key=c.choice_probs.get) == c.text
