"""The scheduler's policy without a model: who gets the next free sequence, and the bound on how long a prompt
that is only waited on may wait behind streamed ones."""
from dataclasses import dataclass

import pytest

import newrllama
from newrllama.engine.policy import SchedulerConfig, WaitingQueue, priority


@dataclass
class Waiting:
    name: str
    streamed: bool
    cancelled: bool = False
    arrival: int = -1
    arrived_step: int = 0


def test_streams_go_first_then_the_rest_by_arrival():
    q = WaitingQueue(SchedulerConfig(max_steps_behind_streams=100))
    for name, streamed in [("a", False), ("s1", True), ("b", False), ("s2", True)]:
        q.push(Waiting(name, streamed), step=0)
    assert [r.name for r in q.in_order(1)] == ["s1", "s2", "a", "b"]
    assert [q.pop(1).name for _ in range(4)] == ["s1", "s2", "a", "b"]
    assert q.pop(1) is None and len(q) == 0


def test_a_prompt_that_waited_the_bound_goes_ahead_of_later_streams_not_earlier_ones():
    q = WaitingQueue(SchedulerConfig(max_steps_behind_streams=5))
    q.push(Waiting("early stream", True), step=0)
    q.push(Waiting("batch", False), step=1)
    q.push(Waiting("late stream", True), step=3)
    assert [r.name for r in q.in_order(5)] == ["early stream", "late stream", "batch"]  # waited 4 steps
    assert [r.name for r in q.in_order(6)] == ["early stream", "batch", "late stream"]  # waited 5: by arrival
    assert [q.pop(6).name for _ in range(3)] == ["early stream", "batch", "late stream"]


@pytest.mark.parametrize("bound", [1, 4, 16])
def test_a_steady_flow_of_streams_delays_a_batch_prompt_by_at_most_the_bound(bound):
    """One sequence frees per step and a new stream arrives every step, so a stream always waits: the batch
    prompt is admitted once it has waited `bound` steps, or right after the 3 streams that came before it
    (without the bound it would wait for ever)."""
    q = WaitingQueue(SchedulerConfig(max_steps_behind_streams=bound))
    for k in range(3):
        q.push(Waiting(f"stream {k}", True), step=0)
    batch = Waiting("batch", False)
    q.push(batch, step=0)
    admitted_at = None
    for step in range(1, 10 * bound + 10):
        q.push(Waiting(f"stream at {step}", True), step)
        if q.pop(step) is batch:
            admitted_at = step
            break
    assert admitted_at is not None and admitted_at <= max(bound, 3) + 1, admitted_at


def test_cancelled_requests_leave_both_lines_in_order():
    q = WaitingQueue(SchedulerConfig())
    items = [Waiting("a", False), Waiting("s", True, cancelled=True), Waiting("b", False, cancelled=True),
             Waiting("t", True)]
    for r in items:
        q.push(r, step=0)
    assert [r.name for r in q.remove_cancelled()] == ["s", "b"]
    assert [r.name for r in q.take_all()] == ["t", "a"] and len(q) == 0


def test_priority_counts_a_streamed_or_overdue_prompt_alike():
    config = SchedulerConfig(max_steps_behind_streams=2)
    r = Waiting("x", False, arrival=7, arrived_step=10)
    assert priority(r, 11, config) == (1, 7)
    assert priority(r, 12, config) == (0, 7)
    assert priority(Waiting("s", True, arrival=8, arrived_step=12), 12, config) == (0, 8)


@pytest.mark.parametrize("field", ["max_steps_behind_streams", "prefill_piece_divisor", "prefix_cache_sequences",
                                   "idle_batches"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_a_config_with_a_bad_number_is_refused(field, bad):
    with pytest.raises(newrllama.InvalidArgumentError, match=field):
        SchedulerConfig(**{field: bad})
