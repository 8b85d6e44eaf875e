"""The scheduler's step building without a model: which holders a step takes, how many tokens each, and in
what order its slots are laid out. Requests are made as the engine makes them, minus a model: their tokens are
plain numbers and no step is run."""
from typing import List

import newrllama
from helpers.fake_kv import FakeKv
from newrllama._lib import ffi
from newrllama.engine.policy import SchedulerConfig
from newrllama.engine.request import Call, Request, RequestStatus
from newrllama.engine.scheduler import Scheduler


N_SEQ = 4


def scheduler(n_batch: int, config: SchedulerConfig = SchedulerConfig()) -> Scheduler:
    return Scheduler(ffi.NULL, FakeKv(), N_SEQ, N_SEQ, n_batch, None, [], None, config)


def admit(s: Scheduler, seq: int, n_prompt: int, n_past: int, streamed: bool = False, arrived_step: int = 0) -> Request:
    """A request in sequence seq whose first n_past prompt tokens are decoded."""
    tokens = list(range(1, n_prompt + 1))
    r = Request(Call(1), 0, tokens, bytes(4 * n_prompt), newrllama.SamplingParams(max_tokens=4), None, 0, 4096,
                lambda token: b"")
    r.start(seq, ffi.NULL, admitted=seq)  # its C buffer of tokens is made at admission, as the engine does
    r.n_past = n_past
    r.arrived_step = arrived_step
    if streamed:
        r.sink = lambda piece, final: None
    s._active[seq] = r
    return r


def layout(s: Scheduler) -> List[tuple]:
    s._build()
    return [(s._slots[i].seq_id, s._slots[i].n_tokens) for i in range(len(s._slot_holders))]


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
