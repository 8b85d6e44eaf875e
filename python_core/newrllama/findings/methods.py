"""A paragraph a methods section can cite: what labelled the texts, how, and what the estimates rest on."""
from __future__ import annotations

import warnings
from collections import Counter
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from ..labels.annotation import check_annotations
from ..labels.text_fit import CUT_WORDS
from ..errors import FailedTextsWarning, InvalidArgumentError
from ..labels.agreement import missing
from .coded import coded_texts
from .coders import Adjudication
from .design import CodingDesign, ordered_keys, stated_design
from .robustness import Robustness
from .prevalence import prevalence
from .regression import Regression
from ..labels.validation import validate
from .sample_check import warn_if_unlike_random

DEBIAS_SENTENCES = {
    "reverse": "by averaging the scores of the list and of its reverse",
    "rotations": "by averaging the scores over every cyclic rotation of the list",
    "prior": "by subtracting each place's pull on the scores, estimated on a sample of the texts under every rotation",
    "batch": "by dividing each label's probability by its mean over the texts",
    "contextual": ("by dividing each label's probability by its mean probability for content-free texts "
                   "(\"N/A\", \"[MASK]\" and an empty text) given the same prompt (contextual calibration; Zhao et al. "
                   "2021)"),
    "none": "not at all (one listing order)",
}
DEBIAS_SENTENCES["auto"] = (f"for texts shorter than two lists of labels (which then followed the list) "
                       f"{DEBIAS_SENTENCES['contextual']}, and for longer texts {DEBIAS_SENTENCES['reverse']}")


def _scored_debias(source: Any) -> str:
    """The debias method the provenance's texts were scored with: "auto" scores every text in two orders for calibration
    (only "auto" records for_calibration)."""
    return "reverse" if source.for_calibration else source.debias


def _source_sentences(source: Any) -> List[str]:
    labels = ", ".join(f'"{label}"' for label in source.labels)
    out = [f"Texts were labelled with newrllama {source.newrllama} and the model {source.model_file} "
           f"(SHA-256 {source.model_sha256})."]
    prompt = f"Each text followed the instruction \"{source.instruction}\"" if source.instruction else "Each text"
    examples = f", after {source.n_examples} coded examples," if source.n_examples else ""
    joined = " and" if source.instruction else ""
    out.append(f"{prompt}{examples}{joined} was followed by the list of {len(source.labels)} labels ({labels}) "
               f"(prompt digest {source.codebook_digest}); each label was scored by the probability of its tokens and "
               "of the end of the answer after the prompt, and the order in which the labels were listed was taken "
               f"out of the scores {DEBIAS_SENTENCES.get(_scored_debias(source), source.debias)}.")
    d = source.determinism
    if d:
        mode = ("batch-invariant (a text's scores do not depend on the other texts decoded with it, "
                "so reruns give identical probabilities)" if d.get("batch_invariant") else "not batch-invariant")
        offloaded = d.get("n_gpu_layers")
        device = f" (device {d['device']})" if d.get("device") else ""
        where = (f", {'every layer' if offloaded < 0 else f'{offloaded} layers'} offloaded to {d.get('backend')}"
                 f"{device}" if offloaded else "")
        out.append(f"Decoding was {mode}, with {d.get('n_threads')} threads{where} on {d.get('build')}.")
    return out


def _first_source(sources: List[Any]) -> Any:
    """The provenance the paragraph describes the labelling by: of a cascade, the first model's."""
    cascade = next((p.cascade for p in sources if p.cascade), None)
    if cascade is None:
        return sources[0] if sources else None
    return next((p for p in sources if p.model_sha256 == cascade["first_model_sha256"]), sources[0])


def _cascade_sentences(source: Any) -> List[str]:
    c = source.cascade
    if not c:
        return []
    return [f"A cascade then labelled {c['rule']} again with a second model, {c['second_model_file']} (SHA-256 "
            f"{c['second_model_sha256']}), under the same prompt, whose labels and probabilities replaced the first "
            f"model's: {c['n_second']} of {c['n_labelled_first']} texts. The rule read the first model's output "
            "alone, never a human code, so the labels are one fixed function of the texts."]


def _strata_sizes(annotations: Sequence[Any], truth: Sequence[Any], design: CodingDesign
                  ) -> Optional[List[Tuple[Hashable, int, int]]]:
    """(stratum, coded texts, texts) of each stratum, over the texts that received a label."""
    if design.strata is None:
        return None
    sizes: Dict[Hashable, List[int]] = {}
    for a, t, s in zip(annotations, truth, design.strata):
        if a.label is not None:
            cell = sizes.setdefault(s, [0, 0])
            cell[0] += not missing(t)
            cell[1] += 1
    return [(s, *sizes[s]) for s in ordered_keys(list(sizes))]


def _failed_sentence(errors: List[str], n_labelled: int) -> str:
    """The texts without a label, by reason, and what that makes of the estimates."""
    reasons = Counter(errors).most_common()
    said = "; ".join(f"{n} {why}" for why, n in reasons[:3]) + ("; and others" if len(reasons) > 3 else "")
    return (f"The other {len(errors)} ({said}) are in none of the estimates: the shares below are of the {n_labelled} "
            "labelled texts, not of all the texts.")


def _agreement_sentence(annotations: Sequence[Any], truth: Sequence[Any]) -> str:
    """The model's labels against the human codes on the coded texts (a failed text counts as wrong)."""
    check = validate([a.label for a in annotations], truth)
    low, high = check.kappa_ci
    return (f"On the {check.n} coded texts the model's labels matched the human codes for {100 * check.accuracy:.1f}% "
            f"(Cohen's kappa {check.kappa:.2f}, bootstrap 95% interval [{low:.2f}, {high:.2f}]).")


def _group_sentences(result: Any, level: int) -> List[str]:
    """Each group's shares, and each group's difference from the reference group."""
    groups = ordered_keys([s.group for s in result.shares])
    out = ["By group: " + "; ".join(
        f"{g}: " + ", ".join(f"{s.label} {s.estimate:.3f} [{s.lower:.3f}, {s.upper:.3f}]"
                             for s in result.shares if s.group == g) for g in groups) + "."]
    if result.differences:
        ref = result.differences[0].reference
        out.append(f"Differences from group {ref} ({level}% intervals): " + "; ".join(
            f"{d.group}, {d.label} {d.estimate:+.3f} [{d.lower:+.3f}, {d.upper:+.3f}]" for d in result.differences)
            + ".")
    return out


def _regression_sentence(fit: Regression, shares_of_these_texts: bool) -> str:
    kind = "A least-squares" if fit.family == "gaussian" else "A logistic"
    level = round(100 * (1 - fit.alpha))
    terms = "; ".join(f"{c.term} {c.estimate:.3f} [{c.lower:.3f}, {c.upper:.3f}]" for c in fit.coefficients)
    estimand = (" Unlike the shares, which are of these texts, the coefficients are of the process the texts come "
                "from (no finite-population correction)." if shares_of_these_texts else
                " The coefficients are of the process the texts come from (no finite-population correction).")
    return (f"{kind} regression was estimated by PPI++ from the model's predictions on all {fit.n_texts} texts and "
            f"the {fit.n_coded} coded ones (weight of the predictions {fit.lam:.2f}), with {level}% intervals: "
            f"{terms}.{estimand}")


def methods_text(annotations: Sequence[Any], truth: Optional[Sequence[Any]] = None, calibration: Any = None,
                 alpha: float = 0.05, design: Optional[CodingDesign] = None,
                 coding: Optional[Adjudication] = None, robustness: Optional[Robustness] = None,
                 by: Optional[Sequence[Hashable]] = None, regression: Optional[Regression] = None) -> str:
    """A paragraph for a methods section: the model (file and SHA-256), the prompt, the debias method, the
    determinism held, how often labels changed with the listing order, the calibration and its cross-validated
    figures, and with ``truth`` (human codes, None where not coded) how the coded sample was drawn (``design``, as
    prevalence() takes it; else the one ``truth`` carries from read_coding_sheet(); else a simple random sample) and
    each label's share estimated by PPI++ with its interval (none for picked texts, which the paragraph says served
    for calibration only, nor for codes given without a design that do not look like a random sample, which it
    says were chosen some other way). ``coding``: the
    Adjudication of several coders' codes (Codings.adjudicate()), whose coders, agreement and rule it reports;
    ``truth`` is then its truth unless given. ``robustness``: a Robustness (robustness()), whose variants and
    verdict it reports. ``annotations`` from annotate() (calibrated or not), or the data frame it returned.

    For the whole study: with ``truth``, the model's agreement with the coders on the coded texts (accuracy and
    Cohen's kappa); ``by`` (a group per text, as prevalence() takes it): each group's shares and each group's
    difference from the first; ``regression`` (regression()'s result): its coefficients with their intervals. Each
    figure says what it is of: the shares of these texts (or of the process, for a design without the
    finite-population correction), the coefficients of the process."""
    if robustness is not None and not isinstance(robustness, Robustness):
        raise InvalidArgumentError(f"robustness must be a Robustness (robustness()), got {type(robustness).__name__}")
    if regression is not None and not isinstance(regression, Regression):
        raise InvalidArgumentError(f"regression must be regression()'s result, got {type(regression).__name__}")

    def closing(shares_of_these_texts: bool) -> List[str]:
        return (([] if regression is None else [_regression_sentence(regression, shares_of_these_texts)])
                + ([] if robustness is None else [robustness.sentence()]))

    annotations = check_annotations(annotations, "annotations")
    labelled = [a for a in annotations if a.label is not None]
    if not labelled:
        raise InvalidArgumentError("no annotation has a label: every text failed")
    source = _first_source([a.provenance for a in labelled if a.provenance is not None])
    out = _source_sentences(source) + _cascade_sentences(source) if source else [
        "Texts were labelled with newrllama (the annotations do not record the model or the prompt)."]
    out.append(f"{len(labelled)} of {len(annotations)} texts received a label.")
    if len(labelled) < len(annotations):
        out.append(_failed_sentence([a.error or "no label" for a in annotations if a.label is None], len(labelled)))
    cut = [a.tokens_cut for a in labelled if a.tokens_cut]
    if cut:
        how = CUT_WORDS.get(source.too_long, "they were cut") if source else "they were cut"
        out.append(f"Texts longer than the model's context held were cut to fit, by tokens ({how}): {len(cut)} of "
                   f"{len(labelled)} texts, {sum(cut)} tokens in all, at most {max(cut)} from one text.")
    flips = [a.order_flip for a in labelled if a.order_flip is not None]
    if flips:
        out.append(f"The preferred label changed with the listing order for {sum(flips)} of {len(flips)} texts "
                   f"({100 * sum(flips) / len(flips):.1f}%).")
    if calibration is not None and not calibration.calibrated:
        why = ("labels agreed with the held-out coded texts' codes at least as well as a calibration's "
               "(cross-validated Cohen's kappa" if calibration.criterion == "kappa" else
               "probabilities predicted the held-out coded texts at least as well as any calibration "
               "(cross-validated log-loss")
        out.append(f"Calibration on {calibration.n} hand-coded texts was considered and not applied: the model's own "
                   f"{why}; accuracy {calibration.cv_accuracy:.2f}, Cohen's kappa {calibration.cv_kappa:.2f}).")
    elif calibration is not None:
        out.append(f"The probabilities were calibrated on {calibration.n} hand-coded texts (a scale and one offset "
                   f"per label, penalised; cross-validated accuracy {calibration.cv_accuracy:.2f}, Cohen's kappa "
                   f"{calibration.cv_kappa:.2f}).")
    if coding is not None:
        if not isinstance(coding, Adjudication):
            raise InvalidArgumentError(f"coding must be an Adjudication (Codings.adjudicate()), got "
                                       f"{type(coding).__name__}")
        if len(coding.truth) != len(annotations):
            raise InvalidArgumentError(f"coding holds {len(coding.truth)} texts' codes for {len(annotations)} "
                                       "annotations")
        out.append(coding.sentence())
        truth = coding.truth if truth is None else truth
    if truth is not None:
        stated = stated_design(design, truth)
        if stated is None:
            check = warn_if_unlike_random(coded_texts(annotations, truth, "probs"), "methods_text()")
            if check is not None and check.unlike_random:
                out.append(f"{check.n_coded} of the {check.n_texts} texts were coded by hand; how they were chosen "
                           f"was not recorded, and they are not a random sample: {check.reason()}. No share was "
                           "estimated from them.")
                return " ".join(out + closing(False))
        design = stated if stated is not None else CodingDesign.random()
        if design.kind == "picked":
            n_coded = sum(not missing(t) for t in truth)
            out.append(design.sentence(n_coded, len(annotations)))
            return " ".join(out + closing(False))
        with warnings.catch_warnings():  # the paragraph states the texts left out
            warnings.simplefilter("ignore", FailedTextsWarning)
            result = prevalence(annotations, truth, alpha=alpha, design=design)
            grouped = prevalence(annotations, truth, by=by, alpha=alpha, design=design) if by is not None else None
        first = result.shares[0]
        level = round(100 * (1 - alpha))
        shares = "; ".join(f"{s.label} {s.estimate:.3f} [{s.lower:.3f}, {s.upper:.3f}]" for s in result.shares)
        out.append(design.sentence(first.n_coded, first.n_texts, _strata_sizes(annotations, truth, design)))
        out.append(_agreement_sentence(annotations, truth))
        out.append("Each label's share was estimated by prediction-powered inference with power tuning (PPI++; "
                   "Angelopoulos, Duchi and Zrnic 2023) from the model's probabilities on every text and the human "
                   f"codes, with {level}% normal intervals: {shares}.")
        if grouped is not None:
            out += _group_sentences(grouped, level)
        return " ".join(out + closing(design.finite))
    if by is not None:
        raise InvalidArgumentError("by= groups the shares, which need truth (the human codes)")
    return " ".join(out + closing(False))
