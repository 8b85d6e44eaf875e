"""Findings from labels and a coded sample: PPI++ shares and coefficients, checked against the authors' ppi-python."""
from __future__ import annotations

import math
import warnings

import numpy as np
import ppi_py
import pytest

import newrllama
from newrllama.findings.ppi import classical_glm, classical_mean, ppi_glm, ppi_mean

LABELS = ["acquisition", "crude oil", "earnings"]


def one(x) -> float:
    """ppi-python's scalar results come as arrays of one element."""
    return float(np.asarray(x).reshape(-1)[0])


def noisy_annotations(rng, truth, accuracy: float):
    """Annotations whose label is right with the given probability, with probabilities that lean to it."""
    out = []
    for t in truth:
        label = t if rng.random() < accuracy else str(rng.choice([x for x in LABELS if x != t]))
        p = rng.dirichlet(np.ones(len(LABELS)))
        p = 0.5 * p + 0.5 * (np.array(LABELS) == label)
        out.append(newrllama.Annotation(label, dict(zip(LABELS, p.tolist()))))
    return out


def population(seed: int, n: int = 400, accuracy: float = 0.75):
    rng = np.random.default_rng(seed)
    truth = [str(t) for t in rng.choice(LABELS, size=n, p=[0.6, 0.3, 0.1])]
    return rng, truth, noisy_annotations(rng, truth, accuracy)


@pytest.mark.parametrize("seed", range(4))
def test_means_agree_with_ppi_python(seed):
    rng = np.random.default_rng(seed)
    n, n_unlabeled = 30 + 10 * seed, 20 + 200 * seed
    y = rng.binomial(1, 0.3, n).astype(float)
    f = np.clip(0.5 * y + rng.uniform(0, 0.5, n), 0, 1)
    f_unlabeled = rng.uniform(0, 1, n_unlabeled)
    for alpha in (0.05, 0.1):
        ours, _ = ppi_mean(y, f, f_unlabeled, alpha)
        lower, upper = ppi_py.ppi_mean_ci(y, f, f_unlabeled, alpha=alpha)
        assert ours.lower == pytest.approx(one(lower), abs=1e-6) and ours.upper == pytest.approx(one(upper), abs=1e-6)
        assert ours.estimate == pytest.approx(one(ppi_py.ppi_mean_pointestimate(y, f, f_unlabeled)), abs=1e-6)
        classical = classical_mean(y, alpha)
        assert (classical.lower, classical.upper) == pytest.approx(
            tuple(map(one, ppi_py.classical_mean_ci(y, alpha=alpha))), abs=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_least_squares_agree_with_ppi_python(seed):
    rng = np.random.default_rng(seed)
    n, n_unlabeled, d = 40 + 20 * seed, 30 + 300 * seed, 3
    x = np.column_stack([np.ones(n), rng.normal(size=(n, d - 1))])
    x_unlabeled = np.column_stack([np.ones(n_unlabeled), rng.normal(size=(n_unlabeled, d - 1))])
    beta = np.array([1.0, 2.0, -1.0])
    y = x @ beta + rng.normal(size=n)
    f = y + rng.normal(size=n) * (0.3 + seed)
    f_unlabeled = x_unlabeled @ beta + rng.normal(size=n_unlabeled)
    ours, _ = ppi_glm("gaussian", x, y, f, x_unlabeled, f_unlabeled, 0.05)
    lower, upper = ppi_py.ppi_ols_ci(x, y, f, x_unlabeled, f_unlabeled, alpha=0.05)
    assert [c.lower for c in ours] == pytest.approx(list(lower), abs=1e-6)
    assert [c.upper for c in ours] == pytest.approx(list(upper), abs=1e-6)
    classical = classical_glm("gaussian", x, y, 0.05)
    lower, upper = ppi_py.classical_ols_ci(x, y, alpha=0.05)
    assert [c.lower for c in classical] == pytest.approx(list(lower), abs=1e-6)
    assert [c.upper for c in classical] == pytest.approx(list(upper), abs=1e-6)


def test_prevalence_is_ppi_on_each_labels_probability():
    rng, truth, annotations = population(7)
    coded = set(rng.choice(len(truth), 60, replace=False).tolist())
    codes = [t if i in coded else None for i, t in enumerate(truth)]
    # Published PPI++ (the process the texts come from): no finite-population correction, as in ppi-python.
    result = newrllama.prevalence(annotations, codes, design=newrllama.CodingDesign.random(finite=False))
    mask = np.array([c is not None for c in codes])
    for k, label in enumerate(LABELS):
        share = result.share(label)
        f = np.array([a.probs[label] for a in annotations])
        y = np.array([t == label for t in truth], dtype=float)
        lower, upper = ppi_py.ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=0.05)
        assert (share.lower, share.upper) == pytest.approx((one(lower), one(upper)), abs=1e-6)
        assert share.lower < share.estimate < share.upper and 0 <= share.lam <= 1
        assert share.naive == sum(a.label == label for a in annotations) / len(annotations)
        assert share.classical == pytest.approx(y[mask].mean())
        assert (share.n_coded, share.n_texts) == (60, len(truth))
    assert sum(s.estimate for s in result.shares) == pytest.approx(1.0, abs=0.15)
    by_labels = newrllama.prevalence(annotations, codes, predictions="labels",
                                     design=newrllama.CodingDesign.random(finite=False)).share("crude oil")
    f = np.array([a.label == "crude oil" for a in annotations], dtype=float)
    y = np.array([t == "crude oil" for t in truth], dtype=float)
    assert (by_labels.lower, by_labels.upper) == pytest.approx(
        tuple(one(v) for v in ppi_py.ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=0.05)), abs=1e-6)


def test_ppi_covers_where_the_naive_share_does_not_and_is_narrower_than_the_coded_sample():
    """Over many random coded samples of a population whose model is biased (it calls earnings acquisitions):
    the PPI intervals cover the true share at about the nominal rate, the naive one rarely."""
    rng, truth, _ = population(11, n=600)
    annotations = [newrllama.Annotation("acquisition" if t == "earnings" else a.label, a.probs)
                   for t, a in zip(truth, noisy_annotations(rng, truth, 0.85))]
    true_share = truth.count("earnings") / len(truth)
    cover = {"ppi": 0, "naive": 0, "classical": 0}
    widths = {"ppi": [], "classical": []}
    draws = 300
    for _ in range(draws):
        coded = set(rng.choice(len(truth), 80, replace=False).tolist())
        s = newrllama.prevalence(annotations, [t if i in coded else None for i, t in enumerate(truth)]).share("earnings")
        cover["ppi"] += s.lower <= true_share <= s.upper
        cover["naive"] += s.naive_lower <= true_share <= s.naive_upper
        cover["classical"] += s.classical_lower <= true_share <= s.classical_upper
        widths["ppi"].append(s.upper - s.lower)
        widths["classical"].append(s.classical_upper - s.classical_lower)
    assert cover["ppi"] / draws >= 0.9 and cover["classical"] / draws >= 0.9
    assert cover["naive"] / draws < 0.5
    assert np.median(widths["ppi"]) < np.median(widths["classical"])


def test_groups_get_their_own_shares_and_differences_from_the_reference():
    rng, truth, annotations = population(3, n=300)
    groups = ["b" if i % 3 else "a" for i in range(len(truth))]
    codes = [t if i % 4 == 0 else None for i, t in enumerate(truth)]
    result = newrllama.prevalence(annotations, codes, by=groups)
    assert {(s.label, s.group) for s in result.shares} == {(label, g) for label in LABELS for g in "ab"}
    for label in LABELS:
        a, b = result.share(label, "a"), result.share(label, "b")
        rows = [i for i, g in enumerate(groups) if g == "a"]
        alone = newrllama.prevalence([annotations[i] for i in rows], [codes[i] for i in rows]).share(label)
        assert (a.estimate, a.lower, a.upper) == (alone.estimate, alone.lower, alone.upper)
        diff = next(d for d in result.differences if d.label == label)
        assert (diff.group, diff.reference) == ("b", "a")
        assert diff.estimate == pytest.approx(b.estimate - a.estimate)
        assert diff.se == pytest.approx(math.hypot(a.se, b.se))
        assert diff.classical == pytest.approx(b.classical - a.classical)
    flipped = newrllama.prevalence(annotations, codes, by=groups, reference="b").differences
    assert all(d.group == "a" and d.reference == "b" for d in flipped)
    rows = result.rows()
    assert len(rows) == len(result.shares) + len(result.differences)
    assert len({tuple(sorted(r)) for r in rows}) == 1 and {r["estimand"] for r in rows} == {"share", "difference"}


def test_failed_annotations_are_left_out_counted_warned_of_and_stated():
    """A text without a label changes what a share is of: never without a word, in the estimate or the paragraph."""
    _, truth, annotations = population(5, n=50)
    for i in (3, 30, 31):
        annotations[i] = newrllama.Annotation(None, None, error="text too long for a sequence")
    annotations[40] = newrllama.Annotation(None, None, error="generation failed")
    codes = [t if i < 20 else None for i, t in enumerate(truth)]
    with pytest.warns(newrllama.FailedTextsWarning, match=r"prevalence\(\): 4 of 50 texts have no label and are left "
                      r"out \(3: text too long for a sequence; 1: generation failed\), 1 of them coded .*"
                      r"the estimate is of the 46 labelled texts, not of all 50"):
        result = newrllama.prevalence(annotations, codes)
    assert result.n_failed == 4 and result.share("acquisition").n_coded == 19
    assert result.share("acquisition").n_texts == 46
    with pytest.warns(newrllama.FailedTextsWarning, match="mean_score"):
        newrllama.mean_score(annotations, codes, {"acquisition": 1, "crude oil": 2, "earnings": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("error", newrllama.FailedTextsWarning)  # the paragraph says it instead
        text = newrllama.methods_text(annotations, codes)
    assert ("46 of 50 texts received a label. The other 4 (3 text too long for a sequence; 1 generation failed) are in "
            "none of the estimates: the shares below are of the 46 labelled texts") in text
    with warnings.catch_warnings():
        warnings.simplefilter("error", newrllama.FailedTextsWarning)
        newrllama.prevalence([a for a in annotations if a.label], [c for a, c in zip(annotations, codes) if a.label])


@pytest.mark.parametrize("change, message", [
    (lambda a, t: (a, t[:-1]), "truth has 49 codes but there are 50 annotations"),
    (lambda a, t: (a, ["sport"] + t[1:]), "truth holds 'sport', not among the labels"),
    (lambda a, t: (a, [None, t[1]] + [None] * 48), "1 coded text: an interval needs at least 2"),
    (lambda a, t: (a + [newrllama.Annotation("x", {"x": 0.5, "y": 0.5})], t + [None]), "other labels"),
    (lambda a, t: ([newrllama.Annotation(None, None, error="e")] * 50, t), "every text failed"),
    (lambda a, t: (["acquisition"] * 50, t), "must be an Annotation"),
    (lambda a, t: (a, "acquisition"), "truth must be a list"),
])
def test_bad_input_to_prevalence_is_a_clear_error(change, message):
    _, truth, annotations = population(2, n=50)
    annotations, codes = change(annotations, [t if i % 2 else None for i, t in enumerate(truth)])
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.prevalence(annotations, codes)


@pytest.mark.parametrize("kwargs, message", [
    ({"alpha": 1.5}, "alpha must be a number in"), ({"predictions": "votes"}, "predictions must be"),
    ({"by": ["a"] * 3}, "by has 3 groups for 50"), ({"by": ["a", None] * 25}, "missing groups"),
    ({"by": ["a", "b"] * 25, "reference": "c"}, "reference 'c' is not one of the groups"),
    ({"by": ["a"] * 49 + ["b"]}, "in group 'b'"),
])
def test_bad_options_of_prevalence_are_clear_errors(kwargs, message):
    _, truth, annotations = population(2, n=50)
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.prevalence(annotations, [t if i % 2 else None for i, t in enumerate(truth)], **kwargs)


@pytest.mark.filterwarnings("ignore:'penalty' was deprecated:FutureWarning")  # ppi-python's own scikit-learn call
@pytest.mark.parametrize("seed, noise", [(0, 0.5), (1, 0.5), (2, 2.5), (3, 2.5)])
def test_logistic_coefficients_agree_with_ppi_python(seed, noise):
    """Predictions that track the codes closely (lambda clipped at 1) and loosely (lambda between 0 and 1)."""
    rng = np.random.default_rng(40 + seed)
    n, n_unlabeled = 150 + 50 * seed, 400 + 300 * seed
    x = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    x_unlabeled = np.column_stack([np.ones(n_unlabeled), rng.normal(size=(n_unlabeled, 2))])
    beta = np.array([-0.5, 1.0, -0.8])
    p = 1 / (1 + np.exp(-x @ beta))
    y = (rng.random(n) < p).astype(float)
    f = 1 / (1 + np.exp(-(x @ beta + 1.5 * (y - p) + rng.normal(size=n) * noise)))
    f_unlabeled = 1 / (1 + np.exp(-(x_unlabeled @ beta + rng.normal(size=n_unlabeled) * 0.7)))
    ours, lam = ppi_glm("binomial", x, y, f, x_unlabeled, f_unlabeled, 0.05)
    lower, upper = ppi_py.ppi_logistic_ci(x, y, f, x_unlabeled, f_unlabeled, alpha=0.05)
    assert [c.lower for c in ours] == pytest.approx(list(lower), abs=1e-6)
    assert [c.upper for c in ours] == pytest.approx(list(upper), abs=1e-6)
    assert (lam == 1.0) == (noise < 1)
    classical = classical_glm("binomial", x, y, 0.05)
    lower, upper = ppi_py.classical_logistic_ci(x, y, alpha=0.05)
    assert [c.lower for c in classical] == pytest.approx(list(lower), abs=1e-6)
    assert [c.upper for c in classical] == pytest.approx(list(upper), abs=1e-6)


def test_a_logistic_fit_whose_rectified_loss_has_no_minimum_at_lambda_1_starts_from_the_coded_texts():
    """Predictions on the coded texts far from their codes: the loss rectified with lambda 1 falls without end,
    so lambda is tuned from the coded texts' own fit; the result is a valid interval, not an error."""
    rng = np.random.default_rng(40)
    x = np.column_stack([np.ones(150), rng.normal(size=(150, 2))])
    x_unlabeled = np.column_stack([np.ones(400), rng.normal(size=(400, 2))])
    y = (rng.random(150) < 1 / (1 + np.exp(-x @ [-0.5, 1.0, -0.8]))).astype(float)
    f = np.clip(0.6 * y + 0.4 * rng.random(150), 0, 1)
    f_unlabeled = 1 / (1 + np.exp(-x_unlabeled @ [-0.5, 1.0, -0.8] + rng.normal(size=400) * 0.3))
    with pytest.raises(newrllama.InvalidArgumentError, match="does not converge"):
        ppi_glm("binomial", x, y, f, x_unlabeled, f_unlabeled, 0.05, lam=1.0)
    ours, lam = ppi_glm("binomial", x, y, f, x_unlabeled, f_unlabeled, 0.05)
    assert 0 <= lam < 1 and all(c.lower < c.estimate < c.upper for c in ours)


def test_regression_on_a_model_coded_outcome_agrees_with_ppi_python():
    rng = np.random.default_rng(4)
    n = 500
    x = rng.normal(size=(n, 2))
    truth = (x @ [0.8, -0.5] + rng.normal(size=n) > 0).astype(float)
    predicted = np.clip(0.7 * truth + 0.3 * rng.uniform(size=n), 0, 1)
    coded = rng.random(n) < 0.2
    result = newrllama.regression(x, np.where(coded, truth, np.nan), predicted, names=["age", "income"])
    assert [c.term for c in result.coefficients] == ["(Intercept)", "age", "income"]
    design = np.column_stack([np.ones(n), x])
    lower, upper = ppi_py.ppi_ols_ci(design[coded], truth[coded], predicted[coded], design[~coded],
                                     predicted[~coded], alpha=0.05)
    assert [c.lower for c in result.coefficients] == pytest.approx(list(lower), abs=1e-6)
    assert [c.upper for c in result.coefficients] == pytest.approx(list(upper), abs=1e-6)
    age = result.coefficient("age")
    assert age.upper - age.lower < age.classical_upper - age.classical_lower
    assert (result.n_coded, result.n_texts) == (int(coded.sum()), n)
    none_missing = [None if not c else t for c, t in zip(coded, truth)]
    assert newrllama.regression(x, none_missing, predicted).coefficients[1].estimate == age.estimate


def rectified_loss_minimum(family, x, y, xf, f, x_unlabeled, f_unlabeled, lam):
    """PPI++'s rectified loss minimised by a general-purpose optimiser: the reference for model-coded regressors."""
    from scipy.optimize import minimize

    def loss(theta, xs, ys):
        t = xs @ theta
        return np.mean(np.logaddexp(0, t) - ys * t) if family == "binomial" else np.mean((ys - t) ** 2) / 2

    def rectified(theta):
        return loss(theta, x, y) - lam * loss(theta, xf, f) + lam * loss(theta, x_unlabeled, f_unlabeled)

    return minimize(rectified, np.zeros(x.shape[1]), method="BFGS", options={"gtol": 1e-10}).x


@pytest.mark.parametrize("family", ["gaussian", "binomial"])
def test_a_model_coded_regressor_is_the_rectified_loss_minimum(family):
    """The point estimate at a fixed lambda is what a general optimiser finds on the rectified loss; with the
    regressors the model codes equal to the coded ones, it is ppi-python's (logistic: the same M-estimate)."""
    rng = np.random.default_rng(11)
    n, n_unlabeled = 200, 600
    z = rng.random(n + n_unlabeled) < 0.4
    z_pred = np.clip(0.6 * z + 0.4 * rng.random(n + n_unlabeled), 0, 1)
    w = rng.normal(size=n + n_unlabeled)
    y = (rng.random(n + n_unlabeled) < 1 / (1 + np.exp(-(0.3 + 1.2 * z - 0.5 * w)))).astype(float)
    x, xf = np.column_stack([np.ones_like(w), z, w]), np.column_stack([np.ones_like(w), z_pred, w])
    f = y if family == "gaussian" else np.clip(0.8 * y + 0.2 * rng.random(len(y)), 0, 1)
    args = (x[:n], y[:n], f[:n], xf[n:], f[n:])
    for lam in (0.3, 0.8):
        ours, _ = ppi_glm(family, *args, 0.05, lam=lam, x_predicted=xf[:n])
        expected = rectified_loss_minimum(family, x[:n], y[:n], xf[:n], f[:n], xf[n:], f[n:], lam)
        assert [c.estimate for c in ours] == pytest.approx(list(expected), abs=1e-5)
    if family == "binomial":
        same, _ = ppi_glm(family, x[:n], y[:n], f[:n], x[n:], f[n:], 0.05, lam=0.8, x_predicted=x[:n])
        reference = ppi_py.ppi_logistic_pointestimate(x[:n], y[:n], f[:n], x[n:], f[n:], lam=0.8)
        assert [c.estimate for c in same] == pytest.approx(list(reference), abs=1e-6)


def test_intervals_with_a_model_coded_regressor_cover_where_the_model_coded_regression_does_not():
    """A regressor the model codes with errors that depend on the outcome: regressing on its predictions misses the
    coefficient every time; PPI++ covers it at the nominal rate and is narrower than the coded texts alone."""
    rng = np.random.default_rng(5)
    n_texts, n_coded, draws = 2000, 200, 300
    z = (rng.random(n_texts) < 0.35).astype(float)
    w = rng.normal(size=n_texts)
    y = 1.0 + 0.8 * z + 0.5 * w + rng.normal(size=n_texts)
    z_pred = np.clip(0.55 * z + 0.25 + 0.08 * y + 0.1 * rng.normal(size=n_texts), 0, 1)
    target = np.linalg.lstsq(np.column_stack([np.ones(n_texts), z, w]), y, rcond=None)[0][1]
    naive = np.linalg.lstsq(np.column_stack([np.ones(n_texts), z_pred, w]), y, rcond=None)[0][1]
    covered, narrower = 0, 0
    for _ in range(draws):
        coded = np.zeros(n_texts, dtype=bool)
        coded[rng.choice(n_texts, n_coded, replace=False)] = True
        result = newrllama.regression(np.column_stack([np.where(coded, z, np.nan), w]), y,
                                      predicted_regressors={"oil": z_pred}, names=["oil", "length"])
        oil = result.coefficient("oil")
        covered += oil.lower <= target <= oil.upper
        narrower += oil.upper - oil.lower < oil.classical_upper - oil.classical_lower
    assert abs(naive - target) > 0.3
    assert covered / draws >= 0.9
    assert narrower / draws > 0.5


@pytest.mark.parametrize("kwargs, message", [
    ({"predicted": None}, "nothing is model-coded"),
    ({"predicted_regressors": {"age": [0.5] * 10}}, "not a regressor"),
    ({"predicted_regressors": [[0.5, 1.0]] * 9}, "a table of x's shape"),
    ({"predicted_regressors": {"oil": [0.5] * 9 + [None]}}, "missing values"),
    ({"predicted_regressors": {"oil": [0.5] * 10}, "truth": [1.0] * 4 + [None] * 6}, "coded for some"),
])
def test_bad_input_with_model_coded_regressors_is_a_clear_error(kwargs, message):
    call = {"x": [[1.0, 1.0], [0.0, 2.0], [1.0, 3.0], [0.0, 1.0], [1.0, 5.0]] + [[None, 1.0]] * 5,
            "truth": [1.0] * 5 + [None] * 5, "predicted": [0.5] * 10, "names": ["oil", "length"]}
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.regression(**{**call, **kwargs})


@pytest.mark.parametrize("args, message", [
    (([[1.0]] * 10, [1.0] * 10, [1.0] * 9), "predicted must have one number per text"),
    (([[1.0, 2.0]] * 10, [1.0] * 2 + [None] * 8, [0.5] * 10), "2 coded texts for 3 coefficients"),
    (([[1.0, 2.0]] * 10, [1.0] * 10, [0.5] * 10), "collinear"),
    (([[1.0]] * 10, ["a"] * 10, [0.5] * 10), "truth must hold numbers"),
    (([[1.0]] * 10, [1.0] * 10, [0.5] * 9 + [None]), "predicted has missing values"),
    (([[0.0], [1.0]] * 5, [2.0] * 10, [0.5] * 10, "binomial"), "truth 0 or 1"),
    (([[0.0], [1.0]] * 5, [0.0, 1.0] * 5, [0.5] * 10, "binomial"), "does not converge"),
    (([[1.0]] * 10, [1.0] * 10, [0.5] * 10, "poisson"), "family must be"),
    ((["a"] * 10, [1.0] * 10, [0.5] * 10), "x must be a texts x regressors table"),
])
def test_bad_input_to_regression_is_a_clear_error(args, message):
    family = args[3] if len(args) > 3 else "gaussian"
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.regression(*args[:3], family=family)


def test_a_coding_plan_reaches_the_width_it_promises():
    """Code what the plan says on top of a first random sample: the intervals come out about as wide as planned."""
    rng, truth, annotations = population(21, n=2000)
    first = set(rng.choice(len(truth), 40, replace=False).tolist())
    codes = [t if i in first else None for i, t in enumerate(truth)]
    plan = newrllama.plan_coding(annotations, codes, target_width=0.12, seed=1)
    assert plan.reachable and plan.n_coded == 40 and plan.n_texts == 2000
    assert max(plan.widths.values()) > 0.12 and len(plan.texts) == plan.n_more > 0
    assert not set(plan.texts) & first and len(set(plan.texts)) == plan.n_more
    assert max(plan.expected_widths.values()) <= 0.12
    more = [t if i in first or i in set(plan.texts) else None for i, t in enumerate(truth)]
    widths = [s.upper - s.lower for s in newrllama.prevalence(annotations, more).shares]
    assert max(widths) == pytest.approx(0.12, abs=0.02)
    assert newrllama.plan_coding(annotations, codes, target_width=0.12, seed=1).texts == plan.texts
    assert newrllama.plan_coding(annotations, more, target_width=0.2).n_more == 0


def test_a_width_no_coding_can_reach_says_so():
    _, truth, annotations = population(22, n=60)
    codes = [t if i < 10 else None for i, t in enumerate(truth)]
    plan = newrllama.plan_coding(annotations, codes, target_width=0.01)
    assert not plan.reachable and plan.n_more == 50 and sorted(plan.texts) == list(range(10, 60))
    with pytest.raises(newrllama.InvalidArgumentError, match="target_width must be a number in"):
        newrllama.plan_coding(annotations, codes, target_width=0)
    with pytest.raises(newrllama.InvalidArgumentError, match="1 coded texts: code at least 2"):
        newrllama.plan_coding(annotations, [truth[0]] + [None] * 59, target_width=0.1)


def test_a_coding_sheet_goes_out_empty_and_comes_back_checked(tmp_path):
    texts = ["first story", "second, with a comma", 'third "quoted"', "fourth"]
    ids = ["a1", "b2", "c3", "d4"]
    sheet = newrllama.write_coding_sheet(texts, [2, 0], tmp_path / "sheet.csv", ids=ids)
    lines = sheet.read_text(encoding="utf-8").splitlines()
    assert lines == ["id,text,code", 'c3,"third ""quoted""",', "a1,first story,"]
    sheet.write_text("id,text,code\nc3,x,crude oil\na1,y,\n", encoding="utf-8")
    assert newrllama.read_coding_sheet(sheet, ids, LABELS) == [None, None, "crude oil", None]
    for body, message in [("c3,x,sport\n", "line 2: code 'sport' is not one of the labels"),
                          ("zz,x,earnings\n", "line 2: id 'zz' is not one of the texts"),
                          ("c3,x,earnings\nc3,x,earnings\n", "line 3: id 'c3' a second time")]:
        sheet.write_text("id,text,code\n" + body, encoding="utf-8")
        with pytest.raises(newrllama.InvalidArgumentError, match=message):
            newrllama.read_coding_sheet(sheet, ids, LABELS)
    sheet.write_text("name,label\nc3,earnings\n", encoding="utf-8")
    with pytest.raises(newrllama.InvalidArgumentError, match="needs the columns id and code"):
        newrllama.read_coding_sheet(sheet, ids, LABELS)
    with pytest.raises(newrllama.InvalidArgumentError, match="cannot read the coding sheet"):
        newrllama.read_coding_sheet(tmp_path / "none.csv", ids, LABELS)
    with pytest.raises(newrllama.InvalidArgumentError, match="are not positions"):
        newrllama.write_coding_sheet(texts, [4], tmp_path / "x.csv")


def uncertain_where_wrong(rng, truth):
    """Annotations whose probabilities are flat exactly where the label is wrong: what an active plan exploits."""
    out = []
    for t in truth:
        right = rng.random() < 0.8
        label = t if right else str(rng.choice([x for x in LABELS if x != t]))
        top = rng.uniform(0.85, 0.98) if right else rng.uniform(0.36, 0.5)
        p = {x: (top if x == label else (1 - top) / 2) for x in LABELS}
        out.append(newrllama.Annotation(label, p))
    return out


def test_an_active_plan_favours_uncertain_texts_and_its_weighted_intervals_cover():
    rng = np.random.default_rng(31)
    truth = [str(t) for t in rng.choice(LABELS, size=1500, p=[0.6, 0.3, 0.1])]
    annotations = uncertain_where_wrong(rng, truth)
    true_share = truth.count("earnings") / len(truth)
    covered, active_widths, uniform_widths = 0, [], []
    draws = 200
    for d in range(draws):
        first = set(rng.choice(len(truth), 60, replace=False).tolist())
        codes = [t if i in first else None for i, t in enumerate(truth)]
        plan = newrllama.plan_coding(annotations, codes, target_width=0.08, seed=d, active=True)
        chosen = first | set(plan.texts)
        share = newrllama.prevalence(annotations, [t if i in chosen else None for i, t in enumerate(truth)],
                                     inclusion_probs=plan.inclusion_probs).share("earnings")
        covered += share.lower <= true_share <= share.upper
        active_widths.append(share.upper - share.lower)
        uniform = newrllama.plan_coding(annotations, codes, target_width=0.08, seed=d)
        chosen = first | set(uniform.texts)
        u = newrllama.prevalence(annotations, [t if i in chosen else None for i, t in enumerate(truth)]).share("earnings")
        uniform_widths.append(u.upper - u.lower)
    assert covered >= 0.9 * draws
    assert np.median(active_widths) < 0.9 * np.median(uniform_widths)
    probs = plan.inclusion_probs
    unsure = [probs[i] for i, a in enumerate(annotations) if max(a.probs.values()) < 0.5]
    sure = [probs[i] for i, a in enumerate(annotations) if max(a.probs.values()) > 0.85]
    assert np.mean(unsure) > 1.3 * np.mean(sure) and abs(len(plan.texts) - plan.n_more) < 4 * math.sqrt(plan.n_more)


def test_inclusion_probabilities_must_be_one_probability_per_text():
    _, truth, annotations = population(2, n=50)
    codes = [t if i % 2 else None for i, t in enumerate(truth)]
    for bad in ([0.5] * 49, [0.0] * 50, ["x"] * 50):
        with pytest.raises(newrllama.InvalidArgumentError, match="inclusion_probs must be"):
            newrllama.prevalence(annotations, codes, inclusion_probs=bad)
    with pytest.raises(newrllama.InvalidArgumentError, match="active must be True or False"):
        newrllama.plan_coding(annotations, codes, 0.1, active="yes")


def test_a_plan_for_a_budget_draws_that_many():
    rng, truth, annotations = population(23, n=300)
    codes = [t if i < 30 else None for i, t in enumerate(truth)]
    plan = newrllama.plan_coding(annotations, codes, budget=50)
    assert plan.n_more == len(plan.texts) == 50 and plan.target_width is None and plan.reachable
    assert all(plan.expected_widths[k] < plan.widths[k] for k in LABELS)
    assert newrllama.plan_coding(annotations, codes, budget=1000).n_more == 270
    for kwargs, message in [({}, "target_width .* or budget"), ({"budget": 5, "target_width": 0.1}, "not both"),
                            ({"budget": -1}, "budget must be a whole number")]:
        with pytest.raises(newrllama.InvalidArgumentError, match=message):
            newrllama.plan_coding(annotations, codes, **kwargs)


def test_a_cross_fitted_coded_text_does_not_see_its_own_code():
    """Each coded text's probabilities come from a calibration fitted without it: changing its code changes
    nothing of its own (a calibration fitted on every coded text and applied to it moves with its code)."""
    _, truth, annotations = population(21, n=300)
    codes = [t if i % 3 == 0 else None for i, t in enumerate(truth)]
    fitted = newrllama.cross_fit(annotations, codes, penalty=1.0)
    flipped = list(codes)
    flipped[0] = next(label for label in LABELS if label != codes[0])
    refitted = newrllama.cross_fit(annotations, flipped, penalty=1.0)
    assert refitted[0].probs == fitted[0].probs
    assert refitted[1].probs != fitted[1].probs  # an uncoded text: every fold's calibration saw the change
    in_sample = newrllama.calibrate(annotations, codes, penalty=1.0).apply(annotations)
    assert newrllama.calibrate(annotations, flipped, penalty=1.0).apply(annotations)[0].probs != in_sample[0].probs
    assert all(math.isclose(sum(a.probs.values()), 1.0) and a.label == max(a.probs, key=a.probs.get) for a in fitted)
    assert [a.raw_probs for a in fitted] == [a.raw_probs for a in annotations]


@pytest.mark.slow
def test_shares_from_cross_fitted_probabilities_cover():
    rng, truth, annotations = population(22, n=600, accuracy=0.7)
    true_share = truth.count("earnings") / len(truth)
    covered, draws = 0, 60
    for _ in range(draws):
        coded = set(rng.choice(len(truth), 80, replace=False).tolist())
        codes = [t if i in coded else None for i, t in enumerate(truth)]
        share = newrllama.prevalence(newrllama.cross_fit(annotations, codes, penalty=1.0), codes).share("earnings")
        covered += share.lower <= true_share <= share.upper
    assert covered / draws >= 0.88


@pytest.mark.parametrize("kwargs, message", [
    ({"folds": 1}, "folds must be an int of at least 2"),
    ({"truth": ["acquisition"] * 5 + [None] * 295}, "cross-fitting needs at least 10"),
    ({"truth": ["acquisition"]}, "one label .or None. per annotation"),
])
def test_bad_input_to_cross_fit_is_a_clear_error(kwargs, message):
    _, truth, annotations = population(23, n=300)
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.cross_fit(annotations, **{"truth": truth, **kwargs})
