"""A coding sheet carries the design its texts were drawn by: written beside the sheet, read back for the same
texts in any order, and giving the estimates the design gave before the sheet was written."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import newrllama
from newrllama.findings.sheet_design import design_path

LABELS = ["acquisition", "crude oil", "earnings"]


def population(rng, n=300):
    source = ["wire" if i % 4 == 0 else "blog" for i in range(n)]
    truth = [str(rng.choice(LABELS, p=[0.6, 0.2, 0.2] if s == "wire" else [0.2, 0.3, 0.5])) for s in source]
    annotations = []
    for t in truth:
        label = t if rng.random() < 0.8 else str(rng.choice([x for x in LABELS if x != t]))
        p = 0.5 * rng.dirichlet(np.ones(3)) + 0.5 * (np.array(LABELS) == label)
        annotations.append(newrllama.Annotation(label, dict(zip(LABELS, p.tolist()))))
    return source, truth, annotations


@pytest.mark.parametrize("active", [False, True])
def test_the_design_of_a_plan_travels_through_the_sheet_to_the_estimates(tmp_path, active):
    rng = np.random.default_rng(3)
    source, truth, annotations = population(rng)
    ids = [f"story-{i}" for i in range(len(truth))]
    first = [t if i % 15 == 0 else None for i, t in enumerate(truth)]
    plan = (newrllama.plan_coding(annotations, first, budget=40, active=True, seed=2) if active else
            newrllama.plan_coding(annotations, first, budget=40, strata=source, seed=2))
    sheet = tmp_path / "to_code.csv"
    newrllama.write_coding_sheet(["text"] * len(truth), plan.texts, sheet, ids=ids, design=plan.design)
    assert design_path(sheet).exists()
    # The coder fills the sheet in; the design comes back for the texts in another order.
    lines = sheet.read_text().splitlines()
    coded = {ids[p]: truth[p] for p in plan.texts}
    sheet.write_text("\n".join([lines[0]] + [line + coded[line.split(",")[0]] for line in lines[1:]]) + "\n")
    back = newrllama.read_coding_design(sheet, list(reversed(ids)))
    assert back == (newrllama.CodingDesign.probabilities(list(reversed(plan.design.inclusion_probs))) if active
                    else newrllama.CodingDesign.stratified(list(reversed(source))))
    codes = newrllama.read_coding_sheet(sheet, ids, LABELS)
    assert sum(c is not None for c in codes) == len(plan.texts)
    read = newrllama.read_coding_design(sheet, ids)
    assert read == plan.design
    merged = [c if c is not None else f for c, f in zip(codes, first)]
    if active:
        merged = codes  # a design by probabilities covers the texts it drew
    from_sheet = newrllama.prevalence(annotations, merged, design=read)
    assert from_sheet.rows() == newrllama.prevalence(annotations, merged, design=plan.design).rows()


def test_picked_and_random_designs_round_trip_and_bad_designs_are_refused(tmp_path):
    sheet = tmp_path / "s.csv"
    texts = ["a", "b", "c"]
    picked = newrllama.CodingDesign.picked("as the least confident labels")
    newrllama.write_coding_sheet(texts, [0, 2], sheet, design=picked)
    assert newrllama.read_coding_design(sheet, [0, 1, 2]) == picked
    newrllama.write_coding_sheet(texts, [0], sheet, design=newrllama.CodingDesign.random(finite=False))
    assert newrllama.read_coding_design(sheet, [2, 1, 0]) == newrllama.CodingDesign.random(finite=False)
    with pytest.raises(newrllama.InvalidArgumentError, match="covers other texts than ids: 1 of its ids"):
        newrllama.read_coding_design(sheet, [0, 1, 7])
    with pytest.raises(newrllama.InvalidArgumentError, match="has 2 strata for 3 texts"):
        newrllama.write_coding_sheet(texts, [0], sheet, design=newrllama.CodingDesign.stratified(["x", "y"]))
    with pytest.raises(newrllama.InvalidArgumentError, match="no coding design beside the sheet"):
        newrllama.read_coding_design(tmp_path / "other.csv", [0, 1, 2])
    design_path(sheet).write_text(json.dumps({"kind": "random"}))
    with pytest.raises(newrllama.InvalidArgumentError, match="not a coding design newrllama wrote"):
        newrllama.read_coding_design(sheet, [0, 1, 2])


def test_the_sheet_functions_take_r_s_order_and_the_earlier_one_with_a_warning(tmp_path):
    """write_coding_sheet(texts, positions, path) and read_coding_sheet(path, ids, labels), as R's take them; the
    earlier orders still give the same sheet and codes, with a NewrllamaDeprecationWarning."""
    texts, ids = ["Texaco bought Getty.", "OPEC cut output.", "Chevron bought Gulf."], ["a1", "b2", "c3"]
    new = newrllama.write_coding_sheet(texts, [0, 2], tmp_path / "new.csv", ids=ids)
    with pytest.warns(newrllama.NewrllamaDeprecationWarning, match=r"takes \(texts, positions, path\)"):
        old = newrllama.write_coding_sheet(tmp_path / "old.csv", texts, [0, 2], ids=ids)
    assert old.read_text() == new.read_text()
    new.write_text(new.read_text().replace("Getty.,", "Getty.,acquisition").replace("Gulf.,", "Gulf.,acquisition"))
    expected = ["acquisition", None, "acquisition"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", newrllama.NewrllamaDeprecationWarning)
        assert newrllama.read_coding_sheet(new, ids, LABELS) == expected
        assert newrllama.read_codings([new], ids, LABELS).coders == ("new",)
    for read in (newrllama.read_coding_sheet, newrllama.read_codings):
        with pytest.warns(newrllama.NewrllamaDeprecationWarning, match="the ids before the labels"):
            earlier = read(new, LABELS, ids)
        assert earlier == expected if read is newrllama.read_coding_sheet else earlier.coders == ("new",)
