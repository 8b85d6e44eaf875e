"""AnnotationTask: annotate()'s task as one checked object, taken by annotate(), a Cluster's workers and R alike."""
from __future__ import annotations

import pickle

import pytest

import newrllama
from newrllama.labels.annotation_job import AnnotationJob

LABELS = ["sports", "business", "weather"]
TEXTS = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits."]


def test_a_task_is_checked_when_made():
    with pytest.raises(newrllama.InvalidArgumentError, match="not both or neither"):
        newrllama.AnnotationTask(LABELS, codebook={"topic": LABELS})
    with pytest.raises(newrllama.InvalidArgumentError, match="debias must be one of"):
        newrllama.AnnotationTask(LABELS, debias="sideways")
    with pytest.raises(newrllama.InvalidArgumentError, match="examples_in"):
        newrllama.AnnotationTask(LABELS, examples_in="user")
    with pytest.raises(newrllama.InvalidArgumentError, match="not one of the labels"):
        newrllama.AnnotationTask(LABELS, definitions={"politics": "about government"})


def test_a_task_knows_its_questions_and_codebooks():
    one = newrllama.AnnotationTask({"sports": "games and athletes", "business": "", "weather": ""}, "Topic?")
    assert one.questions is None and one.books[None].labels == tuple(LABELS)
    assert one.books[None].definitions == (("sports", "games and athletes"),)
    several = newrllama.AnnotationTask(codebook={"topic": LABELS, "tone": ["positive", "negative"]})
    assert several.questions == ["topic", "tone"]
    assert several.books["tone"].question == "tone"


def test_a_task_beside_its_own_arguments_is_refused():
    task = newrllama.AnnotationTask(LABELS, "Give the topic.")
    with pytest.raises(newrllama.InvalidArgumentError, match="instruction, debias"):
        newrllama.annotate(TEXTS, task, "Another instruction.", debias="none")
    with pytest.raises(newrllama.InvalidArgumentError, match="give them to the task"):
        newrllama.annotate(TEXTS, task, examples=[(TEXTS[0], "sports")])


def test_a_task_survives_pickling_as_a_cluster_sends_it():
    task = newrllama.AnnotationTask(LABELS, "Give the topic.", examples=[(TEXTS[0], "sports")], debias="reverse")
    back = pickle.loads(pickle.dumps(task))
    assert back.books == task.books and back.debias == "reverse" and back.questions is None


def test_the_digest_of_a_text_follows_every_setting_of_its_task():
    base = AnnotationJob(TEXTS, newrllama.AnnotationTask(LABELS, "Give the topic."))
    same = AnnotationJob(TEXTS, newrllama.AnnotationTask(LABELS, "Give the topic."))
    assert base.digests == same.digests and base.digests[0] != base.digests[1]
    for other in (newrllama.AnnotationTask(LABELS, "Give the subject."),
                  newrllama.AnnotationTask(LABELS[::-1], "Give the topic."),
                  newrllama.AnnotationTask(LABELS, "Give the topic.", debias="reverse"),
                  newrllama.AnnotationTask(LABELS, "Give the topic.", examples_in="turns")):
        assert AnnotationJob(TEXTS, other).digests[0] != base.digests[0]


def test_a_task_labels_as_its_arguments_do(ctx):
    task = newrllama.AnnotationTask(LABELS, "Give the topic of the news text.", debias="reverse")
    by_task = newrllama.annotate(TEXTS, task, context=ctx)
    by_arguments = newrllama.annotate(TEXTS, LABELS, "Give the topic of the news text.", debias="reverse", context=ctx)
    assert by_task == by_arguments
    assert all(a.label in LABELS for a in by_task)
