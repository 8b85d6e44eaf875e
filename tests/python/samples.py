"""Prompts shared by the tests."""

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
