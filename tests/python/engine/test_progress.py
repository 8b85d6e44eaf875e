"""Progress bars: by default on a terminal once a call has run a few seconds, never in a log; on or off when asked."""
from __future__ import annotations

import io
import sys

import pytest

from newrllama.engine.progress import SHOW_AFTER, progress_bar


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
