"""Several coders: sheets with a coder column, their agreement, one truth adjudicated from them, the methods text."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

import newrllama

LABELS = ["acquisition", "crude oil", "earnings"]


def fill(path, codes_by_id):
    rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
    for row in rows:
        row["code"] = codes_by_id(row["coder"], row["id"])
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_a_sheet_for_two_coders_comes_back_as_their_codings(tmp_path):
    texts = ["Texaco buys Getty.", "OPEC cuts output.", "IBM earns more.", "Oil falls.", "Gulf is sold."]
    ids = [f"s{i}" for i in range(5)]
    sheet = newrllama.write_coding_sheet(texts, [0, 1, 3], tmp_path / "two.csv", ids=ids, coders=["ana", "ben"])
    rows = list(csv.DictReader(open(sheet, encoding="utf-8")))
    assert [r["coder"] for r in rows] == ["ana"] * 3 + ["ben"] * 3 and rows[0]["text"] == texts[0]
    truth = {"s0": "acquisition", "s1": "crude oil", "s3": "crude oil"}
    fill(sheet, lambda coder, i: "earnings" if (coder, i) == ("ben", "s3") else truth[i])
    codings = newrllama.read_codings(sheet, ids, LABELS)
    assert codings.coders == ("ana", "ben")
    assert codings.codes[0] == ("acquisition", "crude oil", None, "crude oil", None)
    assert codings.codes[1][3] == "earnings"
    with pytest.raises(newrllama.InvalidArgumentError, match="read_codings"):
        newrllama.read_coding_sheet(sheet, ids, LABELS)
    # A third coder's own sheet settles the tie.
    third = newrllama.write_coding_sheet(texts, [3], tmp_path / "cleo.csv", ids=ids)
    rows = list(csv.DictReader(open(third, encoding="utf-8")))
    rows[0]["code"] = "crude oil"
    with open(third, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "text", "code"])
        writer.writeheader()
        writer.writerows(rows)
    tiebreak = newrllama.read_coding_sheet(third, ids, LABELS)
    settled = codings.adjudicate(tiebreak=tiebreak)
    assert settled.truth == ["acquisition", "crude oil", None, "crude oil", None]
    assert (settled.n_coded, settled.n_multiple, settled.n_disagreed, settled.n_tiebroken, settled.n_unresolved) == \
        (3, 3, 1, 1, 0)
    unsettled = codings.adjudicate()
    assert unsettled.truth[3] is None and unsettled.n_unresolved == 1
    # The third coder's sheet read as a coder of its own: the file's name names it.
    three = newrllama.read_codings([sheet, third], ids, LABELS)
    assert three.coders == ("ana", "ben", "cleo")
    assert three.adjudicate("majority").truth[3] == "crude oil"
    assert three.adjudicate("unanimous").truth[3] is None


def test_agreement_is_krippendorffs_alpha_overall_and_per_label():
    a = ["acquisition", "crude oil", "earnings", "crude oil", "acquisition", None]
    b = ["acquisition", "crude oil", "acquisition", "crude oil", "acquisition", "earnings"]
    codings = newrllama.Codings(tuple(LABELS), ("a", "b"), (tuple(a), tuple(b)))
    agreed = codings.agreement()
    assert agreed.alpha == pytest.approx(newrllama.agreement([a, b]).alpha)
    assert agreed.n_units == 5 and agreed.percent_agreement == pytest.approx(4 / 5)
    assert agreed.per_label["crude oil"] == pytest.approx(1.0)
    binary = [[None if v is None else v == "earnings" for v in row] for row in (a, b)]
    assert agreed.per_label["earnings"] == pytest.approx(newrllama.agreement(binary).alpha)
    only_one = newrllama.Codings(tuple(LABELS), ("a", "b"), (tuple(a[:3]) + (None,) * 3, (None,) * 3 + tuple(b[3:])))
    with pytest.raises(newrllama.InvalidArgumentError, match="no text was coded by two or more"):
        only_one.agreement()


def test_bad_codings_are_clear_errors(tmp_path):
    with pytest.raises(newrllama.InvalidArgumentError, match="not among the labels"):
        newrllama.Codings(tuple(LABELS), ("a",), (("sport",),))
    with pytest.raises(newrllama.InvalidArgumentError, match="each named once"):
        newrllama.Codings(tuple(LABELS), ("a", "a"), (("earnings",), ("earnings",)))
    codings = newrllama.Codings(tuple(LABELS), ("a", "b"), (("earnings", "crude oil"), ("earnings", "acquisition")))
    with pytest.raises(newrllama.InvalidArgumentError, match="rule must be one of"):
        codings.adjudicate("loudest")
    with pytest.raises(newrllama.InvalidArgumentError, match="tiebreak has 1 codes for 2 texts"):
        codings.adjudicate(tiebreak=["earnings"])
    sheet = newrllama.write_coding_sheet(["x", "y"], [0, 1], tmp_path / "s.csv", coders=["a"])
    with pytest.raises(newrllama.InvalidArgumentError, match="appears in two sheets"):
        newrllama.read_codings([sheet, sheet], [0, 1], LABELS)
    with pytest.raises(newrllama.InvalidArgumentError, match="distinct non-blank names"):
        newrllama.write_coding_sheet(["x"], [0], tmp_path / "t.csv", coders=["a", "a"])


def test_the_methods_text_reports_the_coders_and_estimates_from_the_adjudicated_codes():
    rng = np.random.default_rng(9)
    truth = [str(t) for t in rng.choice(LABELS, size=120, p=[0.5, 0.3, 0.2])]
    annotations = []
    for t in truth:
        p = 0.4 * rng.dirichlet(np.ones(3)) + 0.6 * (np.array(LABELS) == t)
        annotations.append(newrllama.Annotation(LABELS[int(np.argmax(p))], dict(zip(LABELS, p.tolist()))))
    coded = rng.choice(120, 40, replace=False)
    a, b = [None] * 120, [None] * 120
    for i in coded:
        a[i] = truth[i]
        b[i] = truth[i] if rng.random() < 0.85 else str(rng.choice(LABELS))
    codings = newrllama.Codings(tuple(LABELS), ("ana", "ben"), (tuple(a), tuple(b)))
    settled = codings.adjudicate(tiebreak=a)
    text = newrllama.methods_text(annotations, coding=settled)
    assert "coded by 2 coders (ana, ben); 40 of the 40 coded texts were coded by two or more" in text
    assert f"Krippendorff's alpha {settled.agreement.alpha:.2f}" in text and "further coder" in text
    share = newrllama.prevalence(annotations, settled.truth).share("earnings")
    assert f"earnings {share.estimate:.3f}" in text and not math.isnan(settled.agreement.alpha)
