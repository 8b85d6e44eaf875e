"""The annotation options' one table (labels/annotation_options.py) against what implements it and what is written
from it: AnnotationTask's and Recording's fields, every door's signature and documentation, and the regions
scripts/write_annotation_options.py writes (R's formals: r_package/tests/testthat/test-annotate.R)."""
import dataclasses
import importlib.util
import inspect
from pathlib import Path

import pytest

import newrllama
from newrllama.labels.annotation_options import ANNOTATION_OPTIONS
from newrllama.labels.annotation_task import AnnotationTask
from newrllama.runs.recording import Recording

ROOT = Path(__file__).resolve().parents[3]


def writer():
    spec = importlib.util.spec_from_file_location("write_annotation_options",
                                                  ROOT / "scripts" / "write_annotation_options.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fields_of(cls, leave_out=()):
    return {f.name: f.default for f in dataclasses.fields(cls) if f.init and f.name not in leave_out}


def test_the_table_is_the_tasks_and_the_recordings_fields_with_their_defaults():
    table = {owner: {o.name: o.default for o in ANNOTATION_OPTIONS if o.owner == owner}
             for owner in ("task", "recording")}
    assert table["task"] == fields_of(AnnotationTask, leave_out=("labels", "instruction"))
    assert table["recording"] == fields_of(Recording)


def test_every_written_region_is_current():
    assert writer().out_of_date() == []


def test_a_region_edited_by_hand_is_found_out_of_date(tmp_path, monkeypatch):
    module = writer()
    source = ROOT / "r_package" / "R" / "annotation_plan.R"
    edited = tmp_path / "R" / "annotation_plan.R"
    edited.parent.mkdir()
    edited.write_text(source.read_text().replace("too_long = NULL", "too_long = \"error\""))
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "R_FORMALS", ("R/annotation_plan.R",))
    monkeypatch.setattr(module, "PYTHON_SIGNATURES", ())
    monkeypatch.setattr(module, "PYTHON_DOCSTRINGS", ())
    monkeypatch.setattr(module, "R_TOPIC", tmp_path / "R" / "annotation_options.R")
    module.R_TOPIC.write_text(module.r_topic())
    assert module.out_of_date() == ["R/annotation_plan.R"]


@pytest.mark.parametrize("door", [newrllama.annotate, newrllama.Cluster.annotate], ids=lambda d: d.__qualname__)
def test_every_option_is_a_keyword_argument_with_the_tables_default(door):
    parameters = inspect.signature(door).parameters
    departing = {o.name: (parameters[o.name].default if o.name in parameters else "missing", o.default)
                 for o in ANNOTATION_OPTIONS
                 if o.name not in parameters or parameters[o.name].default != o.default
                 or parameters[o.name].kind is not inspect.Parameter.KEYWORD_ONLY}
    assert departing == {}


def test_annotate_documents_every_option():
    doc = inspect.getdoc(newrllama.annotate)
    assert [o.name for o in ANNOTATION_OPTIONS if f"- ``{o.name}`` (default" not in doc] == []


def test_plan_annotation_takes_the_tasks_options_and_leaves_the_rest_to_the_context():
    parameters = inspect.signature(newrllama.plan_annotation).parameters
    assert {"labels", "instruction"} <= set(parameters)
    assert any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    with pytest.raises(newrllama.InvalidArgumentError, match="too_long"):
        newrllama.plan_annotation(["a text"], ["a", "b"], too_long="sometimes", sample=0)
