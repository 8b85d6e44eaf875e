"""Does a finding survive the choices that should not matter? robustness().

A finding from model labels can hinge on the wording of the instruction, the order the labels are listed in, the
debias method for that order, or the model (Baumann et al. 2025, "LLM hacking"). robustness() labels the texts
again under each such choice, one at a time around the baseline (the first instruction, the first model, the default
debias method), re-estimates the finding each time with its interval, and says whether its estimate stays within the
baseline's interval, whether its sign (against ``null``) holds, and whether its significance (the interval excluding
``null``) holds. The variants and the verdict live here; R's robustness() labels with its own verbs and sends
each variant's estimate back to judge()."""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..errors import InvalidArgumentError, NewrllamaDeprecationWarning
from ..frames import Tabular
from ..labels.annotate import annotate
from ..labels.order_bias import DEFAULT_DEBIAS

# The debias methods and listing orders tried beside the baseline's method: scoring both orders, and no debiasing at
# all with the labels listed as given and reversed (the choice debiasing exists to take away).
DEBIAS_VARIANTS = ("reverse", "as given", "reversed")


@dataclass(frozen=True)
class Variant:
    """One way of labelling the texts: what changed from the baseline, and the settings that change it."""

    name: str
    changed: str            # "baseline", "instruction", "model", "debias" or "listing order"
    instruction: str
    debias: str
    reverse_labels: bool    # list the labels in reverse (with debias "none", the order they are shown in)
    model: Optional[str]    # None: the baseline's model


@dataclass(frozen=True)
class VariantEstimate:
    name: str
    changed: str
    estimate: float
    lower: float
    upper: float
    within_baseline: bool           # the estimate lies in the baseline's interval
    same_sign: Optional[bool]       # on the same side of null as the baseline's (None without null)
    same_significance: Optional[bool]  # its interval excludes null exactly when the baseline's does


@dataclass(frozen=True)
class Robustness(Tabular):
    """The finding under each variant (the baseline first) and whether it held."""

    finding: str
    estimates: List[VariantEstimate]
    null: Optional[float]

    @property
    def estimate_holds(self) -> bool:
        return all(e.within_baseline for e in self.estimates)

    @property
    def sign_holds(self) -> Optional[bool]:
        return None if self.null is None else all(bool(e.same_sign) for e in self.estimates)

    @property
    def significance_holds(self) -> Optional[bool]:
        return None if self.null is None else all(bool(e.same_significance) for e in self.estimates)

    def rows(self) -> List[Dict[str, Any]]:
        return [asdict(e) for e in self.estimates]

    def sentence(self) -> str:
        """What was varied and what held, for a methods section."""
        others = self.estimates[1:]
        if not others:
            return f"The finding ({self.finding}) was estimated under one setting only; its robustness was not checked."
        varied = sorted({e.changed for e in others})
        held = sum(e.within_baseline for e in others)
        out = (f"To check that the finding ({self.finding}) does not hinge on choices that should not matter, the "
               f"texts were labelled again under {len(others)} variants, one choice at a time ({', '.join(varied)}), "
               f"and the finding re-estimated with its interval: the estimate stayed within the baseline's interval "
               f"under {held} of {len(others)}")
        if self.null is not None:
            out += (f", its sign against {self.null:g} held under {sum(bool(e.same_sign) for e in others)}, and its "
                    f"significance under {sum(bool(e.same_significance) for e in others)}")
        return out + "."


def variants(instruction: Union[str, Sequence[str]], debias: str = DEFAULT_DEBIAS,
             models: Sequence[str] = (), debias_variants: Sequence[str] = DEBIAS_VARIANTS) -> List[Variant]:
    """The baseline and the variants around it: each further instruction, each further model, each of
    ``debias_variants``."""
    wordings = [instruction] if isinstance(instruction, str) else list(instruction)
    if not wordings or not all(isinstance(w, str) for w in wordings):
        raise InvalidArgumentError("instruction must be a string, or a list of wordings (the first is the baseline)")
    unknown = [c for c in debias_variants if c not in DEBIAS_VARIANTS]
    if unknown:
        raise InvalidArgumentError(f"debias_variants must be among {list(DEBIAS_VARIANTS)}, got {unknown}")
    out = [Variant("baseline", "baseline", wordings[0], debias, False, None)]
    out += [Variant(f"instruction {k + 1}", "instruction", w, debias, False, None)
            for k, w in enumerate(wordings) if k > 0]
    out += [Variant(f"model {m}", "model", wordings[0], debias, False, str(m)) for m in models]
    for variant in debias_variants:
        if variant == "reverse" and debias != "reverse":
            out.append(Variant("debias 'reverse' (both listing orders)", "debias", wordings[0], "reverse", False,
                               None))
        elif variant in ("as given", "reversed"):
            out.append(Variant(f"debias 'none', labels listed {variant}", "listing order", wordings[0], "none",
                               variant == "reversed", None))
    return out


def judge(finding: str, runs: Sequence[Variant], intervals: Sequence[Any], null: Optional[float] = 0.0) -> Robustness:
    """The verdict from each variant's estimate (anything with ``estimate``, ``lower`` and ``upper``: a Share,
    a ShareDifference, a Coefficient), the baseline's first."""
    if len(runs) != len(intervals) or not runs:
        raise InvalidArgumentError(f"{len(intervals)} estimates for {len(runs)} variants: give one per variant")
    if null is not None and (isinstance(null, bool) or not isinstance(null, (int, float))):
        raise InvalidArgumentError(f"null must be a number or None, got {null!r}")
    values = [_interval(i, v.name) for i, v in zip(intervals, runs)]
    base_estimate, base_lower, base_upper = values[0]

    def side(estimate: float) -> int:
        return (estimate > null) - (estimate < null)

    def significant(lower: float, upper: float) -> bool:
        return not lower <= null <= upper

    out = []
    for v, (estimate, lower, upper) in zip(runs, values):
        out.append(VariantEstimate(
            v.name, v.changed, estimate, lower, upper, base_lower <= estimate <= base_upper,
            None if null is None else side(estimate) == side(base_estimate),
            None if null is None else significant(lower, upper) == significant(base_lower, base_upper)))
    return Robustness(finding, out, None if null is None else float(null))


def _interval(value: Any, name: str):
    try:
        return float(value.estimate), float(value.lower), float(value.upper)
    except (AttributeError, TypeError, ValueError):
        raise InvalidArgumentError(f"the finding under {name!r} must give an estimate with its interval (a Share, "
                                   f"ShareDifference or Coefficient: estimate, lower, upper), got "
                                   f"{type(value).__name__}") from None


def robustness(texts: Sequence[Optional[str]], labels: Any, instruction: Union[str, Sequence[str]],
               finding: Callable[[Any], Any], *, name: str = "the finding", null: Optional[float] = 0.0,
               models: Sequence[Any] = (), debias_variants: Sequence[str] = DEBIAS_VARIANTS,
               debias: str = DEFAULT_DEBIAS, context: Any = None, model: Any = None,
               cures: Optional[Sequence[str]] = None, **annotate_kwargs: Any) -> Robustness:
    """Re-estimates a finding under the choices that should not matter and says whether it held.

    ``instruction``: the baseline's wording, or a list of wordings (the first is the baseline, each other one a
    variant); ``models``: further models (GGUF paths or recommended names), each a variant, labelled on a context
    made for the call; ``debias_variants``: "reverse" (score both listing orders), "as given" and "reversed" (debias
    "none", the labels listed as given or reversed; ``cures``, its old name, still works and warns). ``finding``: a
    function of the annotations that gives the estimate with its interval, e.g.
    ``lambda a: prevalence(a, truth).share("crude oil")`` or a ShareDifference or Coefficient; ``name`` names it
    in the sentence; ``null``: the value its sign and significance are judged against (None: not judged).
    ``context`` / ``model`` and ``annotate_kwargs`` go to every annotate() call (the model variants get ``model``
    replaced and no context). Each variant labels every text again, at the cost of the first labelling: on a
    large corpus, plan its time with plan_annotation()."""
    if not callable(finding):
        raise InvalidArgumentError("finding must be a function of the annotations that returns an estimate with its "
                                   "interval, e.g. lambda a: prevalence(a, truth).share('crude oil')")
    if cures is not None:
        warnings.warn("robustness(cures=) is now debias_variants=", NewrllamaDeprecationWarning, stacklevel=2)
        debias_variants = cures
    runs = variants(instruction, debias, [str(m) for m in models], debias_variants)
    estimates = []
    for v in runs:
        listed = _reversed(labels) if v.reverse_labels else labels
        where = dict(context=context, model=model) if v.model is None else dict(model=v.model)
        estimates.append(finding(annotate(texts, listed, v.instruction, debias=v.debias, **where, **annotate_kwargs)))
    return judge(name, runs, estimates, null)


def _reversed(labels: Any) -> Any:
    if isinstance(labels, dict):
        return dict(reversed(list(labels.items())))
    if isinstance(labels, (list, tuple)):
        return list(reversed(labels))
    raise InvalidArgumentError("labels must be a list or a dict label -> definition to be listed in reverse")
