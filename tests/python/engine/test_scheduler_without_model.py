"""The scheduler without a model: which holders a step takes, how many tokens each, and in what order its slots
are laid out; and what the scheduler does on the events holders report after a step. Requests are made as the
engine makes them, minus a model: their tokens are plain numbers, no step is run, and a slot's outcome is
written by hand where newrllama_step would write it."""
import math
from typing import List, Optional

import pytest

import newrllama
from helpers.fake_kv import FakeKv
from newrllama._lib import ffi
from newrllama.engine.step.choices import ChoiceScoring, LabelSet
from newrllama.engine.policy import SchedulerConfig
from newrllama.engine.step.request import Call, Request, RequestStatus
from newrllama.engine.step.scheduler import Scheduler
from newrllama.engine.kv.sequence_layout import SequenceLayout
from newrllama.engine.step.step_events import FirstTokensScored, LabelPathScored, PromptCleared, PromptFailed, TokenSampled


N_SEQ = 4


def scheduler(n_batch: int, config: SchedulerConfig = SchedulerConfig()) -> Scheduler:
    """N_SEQ prompts and 2 scratch sequences, no prefix cache."""
    return Scheduler(ffi.NULL, FakeKv(), SequenceLayout(N_SEQ, 0, 2, n_batch, n_ctx_seq=4096), None, None, config)


def admit(s: Scheduler, seq: int, n_prompt: int, n_past: int, streamed: bool = False, arrived_step: int = 0,
          choice: Optional[ChoiceScoring] = None) -> Request:
    """A request in sequence seq whose first n_past prompt tokens are decoded."""
    tokens = list(range(1, n_prompt + 1))
    r = Request(Call(1), 0, tokens, bytes(4 * n_prompt), newrllama.SamplingParams(max_tokens=4), None, 0, 4096,
                lambda token: b"x", choice=choice)
    r.start(seq, ffi.NULL, admitted=seq)  # its C buffer of tokens is made at admission, as the engine does
    r.n_past = n_past
    r.arrived_step = arrived_step
    if streamed:
        r.sink = lambda piece, final: None
    s._active[seq] = r
    return r


def layout(s: Scheduler) -> List[tuple]:
    s.assembly.build(s._active, s._waiting, s._n_steps)
    return [(s.assembly.slots[i].seq_id, s.assembly.slots[i].n_tokens) for i in range(len(s.assembly.holders))]


def test_generating_prompts_take_a_token_each_and_prefill_the_room_left_in_sequence_order():
    s = scheduler(n_batch=64)
    admit(s, 0, 10, 9)   # generating: its next token
    admit(s, 1, 40, 10)  # 30 prompt tokens left
    admit(s, 2, 10, 9)
    admit(s, 3, 30, 10)  # 20 left
    assert [r.status for r in s._active] == [RequestStatus.GENERATING, RequestStatus.PREFILLING] * 2
    # llama.cpp's passes take consecutive sequences in batch order: slots by sequence id, whatever was filled first.
    assert layout(s) == [(0, 1), (1, 30), (2, 1), (3, 20)]


def test_prefill_room_goes_to_streams_first_then_by_admission_and_a_small_piece_waits():
    s = scheduler(n_batch=32)
    admit(s, 0, 40, 10)                  # admitted first, 30 left
    admit(s, 1, 40, 10, streamed=True)   # a stream, 30 left
    # The stream takes its 30; the 2 tokens left are less than a worthwhile piece (n_batch // 4) of a prompt
    # beside it: the other prompt waits for the next step.
    assert layout(s) == [(1, 30)]


def test_a_prompt_that_waited_the_bound_behind_streams_is_prefilled_like_one():
    config = SchedulerConfig(max_steps_behind_streams=3)
    s = scheduler(n_batch=32, config=config)
    admit(s, 0, 40, 10, arrived_step=0)
    admit(s, 1, 40, 10, streamed=True, arrived_step=5)
    s._n_steps = 2
    assert layout(s) == [(1, 30)]
    s._n_steps = 3  # the first has now waited 3 steps: by admission it goes first
    assert layout(s) == [(0, 30)]


def test_sampled_tokens_are_taken_until_max_tokens_then_the_prompt_is_retired_and_its_sequence_freed():
    s = scheduler(n_batch=64)
    r = admit(s, 2, 5, 5)
    for token in (7, 8, 9):
        s.act(TokenSampled(r, token, False))
    assert r.completion is None and s._active[2] is r
    s.act(TokenSampled(r, 10, False))  # max_tokens=4
    assert r.completion.finish_reason == "length" and r.completion.token_ids == [7, 8, 9, 10]
    assert r.completion.text == "xxxx"
    assert s._active[2] is None and s._kv.seqs[2] == []


def test_an_end_of_generation_token_stops_and_a_token_the_grammar_cannot_take_fails_only_its_prompt():
    s = scheduler(n_batch=64)
    stopped, stuck = admit(s, 0, 5, 5), admit(s, 1, 5, 5)
    s.act(TokenSampled(stopped, 3, True))
    s.act(TokenSampled(stuck, -1, False))
    assert stopped.completion.finish_reason == "stop" and stopped.completion.token_ids == []
    assert stuck.completion.finish_reason == "error" and "grammar" in stuck.completion.error
    assert s._active == [None] * N_SEQ


def test_a_cancelled_prompt_ends_at_its_next_token_and_a_failed_one_at_once():
    s = scheduler(n_batch=64)
    cancelled, failing = admit(s, 0, 5, 5), admit(s, 1, 5, 5)
    cancelled.cancelled = True
    s.act(TokenSampled(cancelled, 3, False))
    s.act(PromptFailed(failing, "llama_decode failed"))
    assert cancelled.completion.finish_reason == "cancelled"
    assert failing.completion.finish_reason == "error" and failing.completion.engine_error


def test_a_cleared_prompt_decodes_its_whole_prompt_again():
    s = scheduler(n_batch=64)
    r = admit(s, 0, 20, 12)
    r.n_copied = r.n_cached = 12
    s.act(PromptCleared(r))
    assert (r.n_past, r.n_copied, r.n_cached) == (0, 0, 0)
    assert layout(s) == [(0, 20)]


def test_labels_score_their_first_tokens_then_each_path_on_a_scratch_sequence_then_the_prompt_is_retired():
    labels = ("crude", "crude oil", "grain")
    s = scheduler(n_batch=64)
    choice = ChoiceScoring(LabelSet(labels, [[5], [5, 6], [7]], [99]))
    r = admit(s, 0, 10, 9, choice=choice)
    assert layout(s) == [(0, 1)]  # the prompt's last token: its row scores every label's first token
    first = choice.first.logprobs
    first[0], first[1], first[2] = -1.0, -1.0, -2000.0  # "grain": a probability that rounds to 0
    s.act(FirstTokensScored(r))
    r.n_past = r.n_tokens
    # One path holds "crude" and "crude oil" ("crude" is a start of it), one "grain": each on a scratch sequence
    # with a copy of the prompt, the longer body on the lower sequence.
    assert sorted(layout(s)) == [(N_SEQ, 2), (N_SEQ + 1, 1)]
    assert s._kv.copies == 2
    jobs = list(choice.running)
    for job in jobs:
        scores = job.score.logprobs
        for i, (_, token, label, ends) in enumerate(job.path.scored):
            scores[i] = -0.5 if token == 6 else (-0.1 if label == 0 and ends else -2.0)
    s.act(LabelPathScored(jobs[0]))
    assert r.completion is None  # one path is still running
    s.act(LabelPathScored(jobs[1]))
    assert r.completion.finish_reason == "stop" and r.completion.text == "crude"
    probs, logprobs = r.completion.choice_probs, r.completion.choice_logprobs
    assert abs(sum(probs.values()) - 1) < 1e-12 and probs["grain"] == 0.0
    # Carried as logs: "crude" -1.1, "crude oil" -3.5, "grain" -2002.0 before normalising.
    norm = math.log(math.exp(-1.1) + math.exp(-3.5))
    assert logprobs == pytest.approx({"crude": -1.1 - norm, "crude oil": -3.5 - norm, "grain": -2002.0 - norm})
    assert all(math.exp(logprobs[k]) == pytest.approx(probs[k]) for k in labels)
    assert s._kv.seqs[N_SEQ] == [] and s._kv.seqs[N_SEQ + 1] == [] and s._active[0] is None
