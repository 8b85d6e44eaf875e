"""Answers from a fixed set of labels, each scored by the log-probability of all its tokens after the prompt
and then of what ends the answer (answer_end.py): without the end, a label that begins another could never win.

The prompt's last token is decoded in a scoring slot whose one row gives every
label's first token (one log-sum-exp over the vocabulary for all labels). The rest of
a label of m tokens (its tokens 2..m, then its end) is read from the rows after its m
tokens (its body). Labels whose body is the start of another's share that one's rows
("crude" and "crude oil": the rows after " crude" and " oil"), so each row costs one
decode however many labels read it; a LabelPath is such a body with the label tokens
its rows score. Each path is a LabelJob, decoded in a scratch sequence that holds a copy
of the prompt's KV stream and scored in the same step as everything else. The scratch sequence is cleared after its one step."""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ..kv.prefix_cache import TOKEN_TYPECODE


class Targets:
    """Label tokens to score and the rows they are read from, as int32 arrays that every prompt's slot shares
    (step_assembly.py lends them to C)."""

    __slots__ = ("n_rows", "n", "tokens", "rows")

    def __init__(self, tokens: List[int], rows: List[int]) -> None:
        self.n_rows = max(rows) + 1
        self.n = len(tokens)
        self.tokens = array(TOKEN_TYPECODE, tokens)
        self.rows = array(TOKEN_TYPECODE, rows)


class ScoreRows:
    """What a scoring slot reads (targets shared by every prompt) and where it writes (log-probabilities of
    its own): a step's slot scores its last rows instead of sampling."""

    __slots__ = ("targets", "logprobs")

    def __init__(self, targets: Targets) -> None:
        self.targets = targets
        self.logprobs = array("f", bytes(4 * targets.n))


class LabelPath:
    """Tokens decoded after the prompt (the longest body of its labels) and, by row, the tokens they score:
    each label's later tokens (summed) and each of its answer-ending tokens (their probabilities summed)."""

    __slots__ = ("body", "scored", "targets", "sums", "ends")

    def __init__(self, body: Tuple[int, ...]) -> None:
        self.body = body
        self.scored: List[Tuple[int, int, int, bool]] = []  # (row, token, label, ends the answer)
        self.targets: Optional[Targets] = None  # set once every label is added
        self.sums: List[Tuple[int, List[int]]] = []  # (label, indices into scored) once targets are set
        self.ends: List[Tuple[int, List[int]]] = []

    def add(self, label: int, tokens: List[int], ends: Sequence[int]) -> None:
        self.scored.extend((row, token, label, False) for row, token in enumerate(tokens[1:]))
        self.scored.extend((len(tokens) - 1, token, label, True) for token in ends)

    def seal(self) -> None:
        self.scored.sort()  # by row: the C side computes each row's normaliser once
        self.targets = Targets([token for _, token, _, _ in self.scored], [row for row, _, _, _ in self.scored])
        groups: Dict[Tuple[int, bool], List[int]] = {}
        for i, (_, _, label, is_end) in enumerate(self.scored):
            groups.setdefault((label, is_end), []).append(i)
        self.sums = [(label, idx) for (label, is_end), idx in groups.items() if not is_end]
        self.ends = [(label, idx) for (label, is_end), idx in groups.items() if is_end]


def label_paths(tokens: List[List[int]], ends: Sequence[int]) -> List[LabelPath]:
    """The fewest bodies that hold every label's tokens as a start (longest bodies first)."""
    by_start: Dict[Tuple[int, ...], LabelPath] = {}
    paths = []
    for k in sorted(range(len(tokens)), key=lambda k: -len(tokens[k])):
        body = tuple(tokens[k])
        path = by_start.get(body)
        if path is None:
            path = LabelPath(body)
            paths.append(path)
            for end in range(1, len(body) + 1):
                by_start.setdefault(body[:end], path)
        path.add(k, tokens[k], ends)
    for path in paths:
        path.seal()
    return paths


class LabelSet:
    """One call's labels after a prompt of one kind (ending in a word or not, ended by which tokens): their
    tokens, their paths, and the first tokens read from the prompt's last row; shared by every prompt that
    uses them."""

    __slots__ = ("labels", "tokens", "paths", "first", "longest")

    def __init__(self, labels: Tuple[str, ...], tokens: List[List[int]], ends: Sequence[int]) -> None:
        self.labels = labels
        self.tokens = tokens
        self.paths = label_paths(tokens, ends)
        self.first = Targets([t[0] for t in tokens], [0] * len(tokens))
        self.longest = max(len(t) for t in tokens) + 1  # the rows a label needs, its end's included


class ChoiceScoring:
    """The scoring of one prompt's labels: first tokens from the prompt's last row, then one job per label path."""

    __slots__ = ("labels", "tokens", "longest", "first", "logprob", "waiting", "running")

    def __init__(self, label_set: LabelSet) -> None:
        self.labels = label_set.labels
        self.tokens = label_set.tokens
        self.longest = label_set.longest
        self.first: Optional[ScoreRows] = ScoreRows(label_set.first)
        self.logprob = [0.0] * len(self.labels)
        self.waiting = list(label_set.paths)  # paths still to be scored by a job, the shortest last
        self.running: List["LabelJob"] = []

    def record_first(self) -> None:
        logprobs = self.first.logprobs
        for k in range(len(self.labels)):
            self.logprob[k] = logprobs[k]
        self.first = None

    @property
    def done(self) -> bool:
        return self.first is None and not self.waiting and not self.running

    def result(self) -> Tuple[int, Dict[str, float], Dict[str, float]]:
        """Index of the most probable label, and every label's probability and log-probability (softmax and
        log-softmax of the scores)."""
        top = max(self.logprob)
        weights = [math.exp(lp - top) for lp in self.logprob]
        total = sum(weights)
        log_total = top + math.log(total)
        best = max(range(len(self.labels)), key=self.logprob.__getitem__)
        return (best, {label: w / total for label, w in zip(self.labels, weights)},
                {label: lp - log_total for label, lp in zip(self.labels, self.logprob)})


class LabelJob:
    """One label path of one prompt, decoded in a scratch sequence: a holder of a step slot."""

    __slots__ = ("owner", "path", "seq", "n_past", "tokens", "n_tokens", "sampler", "score")

    def __init__(self, owner, path: LabelPath, seq: int, prompt_length: int) -> None:
        self.owner = owner
        self.path = path
        self.seq = seq
        # Steps feed tokens[n_past:n_tokens] at position n_past: the path's body after the prompt (whose
        # own tokens are never read from here).
        self.tokens = array(TOKEN_TYPECODE, [0] * prompt_length + list(path.body))
        self.n_past = prompt_length
        self.n_tokens = prompt_length + len(path.body)
        self.sampler = None
        self.score = ScoreRows(path.targets)

    def add_scores(self, logprob: List[float]) -> None:
        """Adds to each label's score its later tokens' log-probabilities and the log of its ending's probability."""
        scores = self.score.logprobs
        for label, idx in self.path.sums:
            logprob[label] += sum(scores[i] for i in idx)
        for label, idx in self.path.ends:
            top = max(scores[i] for i in idx)
            logprob[label] += top + math.log(sum(math.exp(scores[i] - top) for i in idx)) if top > -math.inf else top

    # ---- as the holder of a step slot (see scheduler.py) ----

    @property
    def gone(self) -> bool:
        """Its prompt ended while a step ran for it (it was cancelled, say)."""
        return self not in self.owner.choice.running

    def calls(self, active) -> List[object]:
        return [self.owner.call]

    def after_step(self, slot) -> Optional["LabelPathScored"]:
        return LabelPathScored(self) if slot.n_score_rows > 0 else None

    def cleared(self) -> "LabelPathCleared":
        return LabelPathCleared(self)

    def failed(self, why: str) -> "LabelPathFailed":
        return LabelPathFailed(self, f"{why} scoring a label of this prompt")


# What a step did for a label path (step_events.py gathers every holder's events).
@dataclass(frozen=True)
class LabelPathScored:
    """A label path's rows are scored (its job's scratch sequence can go)."""

    job: LabelJob


@dataclass(frozen=True)
class LabelPathCleared:
    """A failed step left a label path's scratch sequence empty: it is scored later from a new copy."""

    job: LabelJob


@dataclass(frozen=True)
class LabelPathFailed:
    """A label path cannot be decoded even alone: its prompt fails."""

    job: LabelJob
    why: str


LabelPathEvent = Union[LabelPathScored, LabelPathCleared, LabelPathFailed]
