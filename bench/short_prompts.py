"""The short, distinct prompts (about 10 tokens) that the server and cluster benchmarks share."""
from __future__ import annotations

from typing import List

SUBJECTS = ["The history of", "A short note on", "Why people like", "The future of", "A recipe for",
            "The science of", "Travelling to", "Learning about"]
TOPICS = ["rivers", "bread", "music", "trains", "gardens", "chess", "mountains", "paper", "bees", "clocks"]


def short_prompts(n: int) -> List[str]:
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {TOPICS[i % len(TOPICS)]} (part {i}):" for i in range(n)]
