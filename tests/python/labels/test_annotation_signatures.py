"""The annotation options are AnnotationTask's fields (and Recording's, for where a run writes): every door that
takes them as arguments takes each of them, with the same default, and annotate() documents each. A new option
that one signature misses fails here (R's verbs: r_package/tests/testthat/test-annotate.R)."""
import dataclasses
import inspect

import pytest

import newrllama
from newrllama.labels.annotation_task import AnnotationTask
from newrllama.runs.recording import Recording

TASK = [f for f in dataclasses.fields(AnnotationTask) if f.init]
RECORDING = [f for f in dataclasses.fields(Recording) if f.init]


def default_of(field: dataclasses.Field):
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


@pytest.mark.parametrize("door", [newrllama.annotate, newrllama.Cluster.annotate], ids=lambda d: d.__qualname__)
def test_every_annotation_option_is_an_argument_with_the_tasks_default(door):
    parameters = inspect.signature(door).parameters
    departing = {f.name: (parameters[f.name].default if f.name in parameters else "missing", default_of(f))
                 for f in TASK + RECORDING
                 if f.name not in parameters or parameters[f.name].default != default_of(f)}
    assert departing == {}


def test_annotate_documents_every_option():
    doc = inspect.getdoc(newrllama.annotate)
    assert [f.name for f in TASK + RECORDING if f"``{f.name}``" not in doc and f"``{f.name}=" not in doc] == []


def test_plan_annotation_takes_the_same_options_through_the_task():
    parameters = inspect.signature(newrllama.plan_annotation).parameters
    assert {"labels", "instruction"} <= set(parameters)
    assert any(p.kind is p.VAR_KEYWORD for p in parameters.values())  # the rest go to AnnotationTask, checked there
    with pytest.raises(newrllama.InvalidArgumentError, match="too_long"):
        newrllama.plan_annotation(["a text"], ["a", "b"], too_long="sometimes", sample=0)
