"""The scoring of labels (choices) across steps: which label paths start in a step, on which scratch sequence,
and what a scored row adds to its prompt's labels (choices.py holds the scoring itself).

A prompt with labels scores their first tokens on its own last row; each label path then gets a job
in a scratch sequence (a copy of the prompt's KV stream) for one step, and the sequence is free again.
The scheduler asks it for jobs while it builds a step and hands it the events of scored rows; whether
a prompt is then finished is the scheduler's decision."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from .choices import LabelJob, LabelPath

if TYPE_CHECKING:  # the C library's side; the bookkeeping here only calls it
    from ..kv.kv_store import KvStore


class LabelFlow:
    def __init__(self, kv: KvStore, scratch_seqs: Sequence[int], n_batch: int) -> None:
        """scratch_seqs: the sequences label paths are decoded in, the highest first (popped lowest first)."""
        self._kv = kv
        self._n_batch = n_batch
        self._scratch_seqs = tuple(scratch_seqs)
        self._free = list(scratch_seqs)

    def refusal(self, r) -> Optional[str]:
        """Why a prompt's labels cannot be scored on this context (None if they can)."""
        if r.choice is None or not r.choice.waiting:
            return None
        if not self._scratch_seqs or r.choice.longest > self._n_batch:
            return ("scoring labels needs a scratch sequence (a label and its end are decoded after the prompt) "
                    f"and labels of fewer than n_batch = {self._n_batch} tokens (make n_batch larger than n_seq_max)")
        return None

    def start_jobs(self, scoring: Sequence, room: int) -> List[LabelJob]:
        """Jobs for the waiting label paths of the prompts in scoring, as many as free scratch sequences and room
        allow. llama.cpp cuts a step over a KV stream per sequence into passes of consecutive sequences that take
        equal numbers of tokens, each pass reading every weight: the longest bodies go on the lowest scratch
        sequences, so that the step's label paths take as many passes as the longest body has tokens."""
        picked: List[Tuple[object, LabelPath]] = []
        for r in scoring:
            waiting = r.choice.waiting
            while waiting and len(picked) < len(self._free) and len(waiting[-1].body) <= room:
                picked.append((r, waiting.pop()))
                room -= len(picked[-1][1].body)
        picked.sort(key=lambda job: -len(job[1].body))
        jobs = []
        for r, path in picked:
            job = LabelJob(r, path, self._free.pop(), r.n_tokens)
            self._kv.copy(r.seq, job.seq, -1)
            r.choice.running.append(job)
            jobs.append(job)
        return jobs

    def first_tokens_scored(self, r) -> None:
        r.choice.record_first()

    def path_scored(self, job: LabelJob) -> None:
        job.add_scores(job.owner.choice.logprob)
        self.end_job(job)

    def path_cleared(self, job: LabelJob) -> None:
        """Its copy of the prompt is gone: the path is scored later from a new one."""
        job.owner.choice.waiting.append(job.path)
        self.end_job(job)

    def end_job(self, job: LabelJob) -> None:
        self._kv.clear(job.seq)
        self._free.append(job.seq)
        self._free.sort(reverse=True)  # popped lowest first (see start_jobs)
        job.owner.choice.running.remove(job)

    def end_jobs_of(self, r) -> None:
        """A prompt ends: its running jobs' scratch sequences are freed."""
        if r.choice is not None:
            for job in list(r.choice.running):
                self.end_job(job)

    def reset(self) -> None:
        """Every prompt failed at once: every scratch sequence is emptied and free."""
        for seq in self._scratch_seqs:
            self._kv.clear(seq)
        self._free = list(self._scratch_seqs)
