"""Prompts under one shared instruction, as annotation sends them: what the prefix cache tests decode."""
from __future__ import annotations

import newrllama

GREEDY = newrllama.SamplingParams(max_tokens=6)
INSTRUCTION = ("You label news stories. Answer with one word: business, sport, science or politics. "
               "Business covers companies, markets and trade. Sport covers games, players and results. "
               "Science covers research, discoveries and technology. Politics covers governments, "
               "elections and laws. Read the story, then answer.\n")
STORIES = ["The central bank raised interest rates again.", "The striker scored twice in the final.",
           "Researchers found water on a distant moon.", "Parliament passed the new budget law.",
           "Shares of the carmaker fell ten percent.", "The champion retired after twenty years.",
           "A new vaccine entered its last trial.", "The president signed the trade agreement.",
           "The airline reported record profits.", "The marathon was won in record time."]
OTHER_INSTRUCTION = ("Translate the sentence into French, keeping names as they are and numbers in digits. "
                     "Use a formal register and do not explain the translation. ") * 5


def annotation_prompts(stories, instruction=INSTRUCTION):
    return [f"{instruction}Story: {s}\nLabel:" for s in stories]


def instruction_tokens(model, instruction=INSTRUCTION) -> int:
    return len(model.tokenize(instruction))
