"""Progress bars: by default on a terminal once a call has run a few seconds, never in a log; on or off when asked."""
from __future__ import annotations

import io
import sys

import pytest

from newrllama.engine.step.progress import SHOW_AFTER, progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stderr, progress, shown, delay", [
    (Terminal(), None, True, SHOW_AFTER),   # someone watches: a bar, once the call has run SHOW_AFTER seconds
    (io.StringIO(), None, False, 0),        # a log or a pipe: none
    (io.StringIO(), True, True, 0),         # asked for: at once, wherever
    (Terminal(), False, False, 0),          # refused: never
])
def test_the_default_bar_shows_on_a_terminal_only_for_long_calls(monkeypatch, stderr, progress, shown, delay):
    monkeypatch.setattr(sys, "stderr", stderr)
    bar = progress_bar(10, progress, "text", "test")
    try:
        assert bar.disable is not shown
        assert not shown or bar.delay == delay
    finally:
        bar.close()


def test_a_function_is_told_the_count_in_the_callers_thread_and_a_wrong_value_is_refused(model):
    import threading

    import newrllama
    told = []
    caller = threading.get_ident()
    with newrllama.Context(model, n_ctx=1024, n_seq_max=2, n_threads=2) as ctx:
        ctx.generate_parallel(["One", "Two", "Three"], newrllama.SamplingParams(max_tokens=2),
                              progress=lambda done, total: told.append((done, total, threading.get_ident())))
        with pytest.raises(newrllama.InvalidArgumentError, match="progress must be True, False, None or a function"):
            ctx.generate_parallel(["One"], progress="yes")
    assert told[0][:2] == (0, 3) and told[-1][:2] == (3, 3)
    assert [d for d, _, _ in told] == sorted(d for d, _, _ in told) and {t for _, _, t in told} == {caller}
